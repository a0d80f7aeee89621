"""A small library with two walled-off collections, and a user of each role, for the access
tests of every way in (services, CLI, UI).

- Collection "Matter A" holds document `a`; "Matter B" holds `b` (their only sentences differ).
- `own`: owned by the editor, in no collection; `loose`: no owner, no collection.
- ada (admin), edna (editor, may write A), vera (viewer, may read A).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.db.models import CollectionGrant, FactSource, Role, User
from app.services import collections, facts, passwords
from tests.app.library_rows import FILLER, store

ONLY_IN_A = "The lessee shall paint the orchard fence every spring."
ONLY_IN_B = "The merger closes when the zeppelin lands in Reykjavik harbour."
PASSWORD = "a long password"
ROLES = (Role.ADMIN, Role.EDITOR, Role.VIEWER)
NAMES = {Role.ADMIN: "ada", Role.EDITOR: "edna", Role.VIEWER: "vera"}


@dataclass(frozen=True)
class World:
    a: int
    b: int
    own: int
    loose: int
    collection_a: int
    collection_b: int
    user_ids: dict[Role, int]


def _fact(session: Session, document_id: int, value: str) -> None:
    facts.save_facts(
        session=session,
        document_id=document_id,
        job_id=None,
        model="rule",
        facts=[
            facts.NewFact(
                field="governing_law",
                label="Governing law",
                position=0,
                value=value,
                normalized_value=value,
                evidence=[],
                page=1,
                confidence=1.0,
                source=FactSource.RULE,
            )
        ],
    )


def build_world(session: Session) -> World:
    hashed = passwords.hash_password(PASSWORD)
    users = {role: User(name=NAMES[role], role=role, password_hash=hashed) for role in ROLES}
    session.add_all(users.values())
    session.flush()
    a = store(session, "Orchard Lease", [FILLER, ONLY_IN_A]).id
    b = store(session, "Zeppelin Merger", [FILLER, ONLY_IN_B]).id
    own = store(session, "Editor Notes", [FILLER, "Notes the editor keeps for herself."])
    own.owner_id = users[Role.EDITOR].id
    loose = store(session, "Loose Memo", [FILLER, "A memo nobody filed anywhere."]).id
    collection_a = collections.create_collection(session=session, name="Matter A")
    collection_b = collections.create_collection(session=session, name="Matter B")
    session.flush()
    collections.add_documents(session=session, collection_id=collection_a.id, document_ids=[a])
    collections.add_documents(session=session, collection_id=collection_b.id, document_ids=[b])
    session.add_all(
        [
            CollectionGrant(
                user_id=users[Role.EDITOR].id, collection_id=collection_a.id, can_write=True
            ),
            CollectionGrant(
                user_id=users[Role.VIEWER].id, collection_id=collection_a.id, can_write=False
            ),
        ]
    )
    _fact(session, a, "Vermont")
    _fact(session, b, "Iceland")
    session.commit()
    return World(
        a=a,
        b=b,
        own=own.id,
        loose=loose,
        collection_a=collection_a.id,
        collection_b=collection_b.id,
        user_ids={role: user.id for role, user in users.items()},
    )
