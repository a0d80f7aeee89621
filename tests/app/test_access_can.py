"""`access.can`, the one question a page asks before it offers a control (accounts, issue 25),
on SQLite and PostgreSQL: every role x action x target answered as the rules below say (a table
written from the issue, not from app/services/access.py), the same as the services' checks,
and nothing written to the audit log."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy.orm import Session

from app.db.models import Role
from app.services import access, audit
from app.services.access import AccessRefused, Actor
from tests.app.access_world import NAMES, ROLES, World, build_world

# What each role may do to the world's documents ("a" in A, "b" in B, the editor's "own", a
# "loose" one in no collection, a "gone" id) and collections (A, B, a "gone" id).
READS = {
    Role.ADMIN: {"a", "b", "own", "loose", "A", "B", "gone collection"},
    Role.EDITOR: {"a", "own", "A"},
    Role.VIEWER: {"a", "A"},
}
WRITES = {
    Role.ADMIN: {"a", "b", "own", "loose", "A", "B", "gone collection", "upload", "create"},
    Role.EDITOR: {"a", "own", "A", "upload", "create"},
    Role.VIEWER: set(),
}
DOCUMENT_ACTIONS = {"view": False, "ask": False, "facts": False}
DOCUMENT_ACTIONS |= {"summarize": True, "facts_run": True, "delete": True}
COLLECTION_ACTIONS = {"view": False, "ask": False, "search": False}
COLLECTION_ACTIONS |= {a: True for a in ("collection_write", "collection_rename", "upload")}
ROLE_ACTIONS = {"upload": "upload", "collection_create": "create"}

CASES = (
    [(a, "document", t) for a in DOCUMENT_ACTIONS for t in ("a", "b", "own", "loose", "gone")]
    + [(a, "collection", t) for a in COLLECTION_ACTIONS for t in ("A", "B", "gone collection")]
    + [(a, "role", a) for a in ROLE_ACTIONS]
)
CELLS = list(itertools.product(ROLES, CASES))


def _expected(role: Role, action: str, kind: str, target: str) -> bool:
    if kind == "role":
        return ROLE_ACTIONS[action] in WRITES[role]
    writes = DOCUMENT_ACTIONS[action] if kind == "document" else COLLECTION_ACTIONS[action]
    return target in (WRITES if writes else READS)[role]


def _id(world: World, kind: str, target: str) -> int:
    named = {"a": world.a, "b": world.b, "own": world.own, "loose": world.loose}
    named |= {"A": world.collection_a, "B": world.collection_b}
    return named.get(target, 10_000)


@pytest.fixture
def world(session: Session) -> World:
    return build_world(session)


def _services_allow(session: Session, actor: Actor, action: str, kind: str, where: dict) -> bool:
    check = access.require_document if kind == "document" else access.require_collection
    writes = DOCUMENT_ACTIONS[action] if kind == "document" else COLLECTION_ACTIONS[action]
    try:
        check(session=session, actor=actor, action=action, write=writes, **where)
    except AccessRefused:
        return False
    return True


def test_can_answers_as_the_rules_and_the_services_do(session, world) -> None:
    # Every cell, one world (a database each is slow on PostgreSQL); the wrong ones listed.
    wrong = []
    for role, (action, kind, target) in CELLS:
        actor = Actor(user_id=world.user_ids[role], name=NAMES[role], role=role)
        where = {} if kind == "role" else {f"{kind}_id": _id(world, kind, target)}
        num_events = len(audit.list_events(session=session))
        answer = access.can(session=session, actor=actor, action=action, **where)
        if len(audit.list_events(session=session)) != num_events:
            wrong.append((role.value, action, target, "logged"))  # a question, not an action
        if answer != _expected(role, action, kind, target):
            wrong.append((role.value, action, target, answer))
        if kind != "role" and _services_allow(session, actor, action, kind, where) != answer:
            wrong.append((role.value, action, target, "the services differ"))
    assert not wrong
    assert len(CELLS) == 3 * (6 * 5 + 6 * 3 + 2)


def test_an_unknown_action_is_a_mistake_not_a_no(session, world) -> None:
    admin = access.local_admin()
    with pytest.raises(ValueError, match="unknown action"):
        access.can(session=session, actor=admin, action="paint", document_id=world.a)
    with pytest.raises(ValueError, match="needs a document or a collection"):
        access.can(session=session, actor=admin, action="summarize")
