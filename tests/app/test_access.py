"""The access rules through the services (app/services/acting.py), on SQLite and PostgreSQL:
every role x action cell allowed or refused, generated from the rules below; the leak tests;
every refusal and sign-in in the audit log without text; a deleted user's rows kept."""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app import migrate
from app.db.models import AuditEvent, Role, User, utc_now
from app.db.session import make_engine, session_factory
from app.services import access, accounts, acting, audit
from app.services.access import AccessRefused, Actor
from app.services.search import SearchFilters
from tests.app.access_world import NAMES, ONLY_IN_A, ONLY_IN_B, PASSWORD, ROLES, World, build_world

ALL = frozenset(ROLES)
WRITERS = frozenset({Role.ADMIN, Role.EDITOR})
ADMIN = frozenset({Role.ADMIN})

# action name -> (what it does, the roles allowed). ada is admin, edna may write A, vera read A.
Act = Callable[..., object]
ACTIONS: dict[str, tuple[Act, frozenset[Role]]] = {
    "view doc in A": (
        lambda s, u, w: acting.open_document(session=s, actor=u, document_id=w.a),
        ALL,
    ),
    "view doc in B": (
        lambda s, u, w: acting.open_document(session=s, actor=u, document_id=w.b),
        ADMIN,
    ),
    "view editor's own doc": (
        lambda s, u, w: acting.open_document(session=s, actor=u, document_id=w.own),
        WRITERS,
    ),
    "view doc in no collection": (
        lambda s, u, w: acting.open_document(session=s, actor=u, document_id=w.loose),
        ADMIN,
    ),
    "summarize doc in A": (
        lambda s, u, w: acting.allow_document_write(
            session=s, actor=u, document_id=w.a, action="summarize"
        ),
        WRITERS,
    ),
    "delete doc in B": (
        lambda s, u, w: acting.allow_document_write(
            session=s, actor=u, document_id=w.b, action="delete"
        ),
        ADMIN,
    ),
    "ask doc in A": (
        lambda s, u, w: acting.allow_ask(session=s, actor=u, document_id=w.a, question="Who?"),
        ALL,
    ),
    "ask doc in B": (
        lambda s, u, w: acting.allow_ask(session=s, actor=u, document_id=w.b, question="Who?"),
        ADMIN,
    ),
    "upload into A": (
        lambda s, u, w: acting.allow_upload(session=s, actor=u, collection_id=w.collection_a),
        WRITERS,
    ),
    "upload into B": (
        lambda s, u, w: acting.allow_upload(session=s, actor=u, collection_id=w.collection_b),
        ADMIN,
    ),
    "search A": (
        lambda s, u, w: acting.search(
            session=s, actor=u, query="fence", filters=SearchFilters(collection_id=w.collection_a)
        ),
        ALL,
    ),
    "search B": (
        lambda s, u, w: acting.search(
            session=s, actor=u, query="fence", filters=SearchFilters(collection_id=w.collection_b)
        ),
        ADMIN,
    ),
    "change A": (
        lambda s, u, w: acting.allow_collection_write(
            session=s, actor=u, collection_id=w.collection_a, action="collection_write"
        ),
        WRITERS,
    ),
    "add B's doc to A": (
        lambda s, u, w: acting.allow_add_documents(
            session=s, actor=u, collection_id=w.collection_a, document_ids=[w.b]
        ),
        ADMIN,
    ),
    "ask collection A": (
        lambda s, u, w: acting.allow_collection_question(
            session=s, actor=u, collection_id=w.collection_a, question="Which?"
        ),
        ALL,
    ),
    "ask collection B": (
        lambda s, u, w: acting.allow_collection_question(
            session=s, actor=u, collection_id=w.collection_b, question="Which?"
        ),
        ADMIN,
    ),
    "create a collection": (
        lambda s, u, w: acting.create_collection(session=s, actor=u, name="New matter"),
        WRITERS,
    ),
    "list users": (lambda s, u, w: accounts.list_users(session=s, actor=u), ADMIN),
    "add a user": (
        lambda s, u, w: accounts.add_user(
            session=s, actor=u, name="newbie", role=Role.VIEWER, password=PASSWORD
        ),
        ADMIN,
    ),
    "read the audit log": (lambda s, u, w: acting.read_audit(session=s, actor=u), ADMIN),
}
CELLS = list(itertools.product(ROLES, ACTIONS))


def actor_of(world: World, role: Role, origin: str = "test") -> Actor:
    return Actor(user_id=world.user_ids[role], name=NAMES[role], role=role, origin=origin)


@pytest.fixture
def world(session) -> World:
    return build_world(session)


def _refusals(session) -> list[AuditEvent]:
    return audit.list_events(session=session, outcome=audit.REFUSED)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def shared_world(request, tmp_path_factory) -> Iterator[tuple[sessionmaker[Session], World]]:
    """One migrated database of each kind with the world, for the whole matrix: each cell
    undoes its writes (a rollback), and finds its own refusal by the log's newest id."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('matrix') / 'longdoc.db'}"
    else:
        admin = request.getfixturevalue("postgres_admin_engine")
        name = f"longdoc_test_{secrets.token_hex(6)}"
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        url = admin.url.set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    engine = make_engine(url)
    sessions = session_factory(engine)
    with sessions() as session:
        world = build_world(session)
    yield sessions, world
    engine.dispose()
    if request.param == "postgres":
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _newest_event_id(session) -> int:
    return session.scalar(select(func.max(AuditEvent.id))) or 0


@pytest.mark.parametrize(("role", "action"), CELLS, ids=[f"{r.value}-{a}" for r, a in CELLS])
def test_every_role_and_action_through_the_services(shared_world, role, action) -> None:
    sessions, world = shared_world
    do, allowed = ACTIONS[action]
    actor = actor_of(world, role)
    with sessions() as session:
        before = _newest_event_id(session)
        if role in allowed:
            do(session, actor, world)
            session.flush()
            session.rollback()  # the next cell sees the same world
            new = session.scalars(select(AuditEvent).where(AuditEvent.id > before)).all()
            assert all(event.outcome == audit.OK for event in new)
        else:
            with pytest.raises(AccessRefused):
                do(session, actor, world)
            session.rollback()
            # Committed by the check, before the rollback.
            (refused,) = session.scalars(select(AuditEvent).where(AuditEvent.id > before)).all()
            assert refused.outcome == audit.REFUSED
            assert refused.user_name == NAMES[role] and refused.user_id == world.user_ids[role]


def test_a_viewer_of_a_never_learns_of_b(session, world, tmp_path: Path) -> None:
    vera = actor_of(world, Role.VIEWER)
    # Search: a sentence only B holds gives nothing, not even a count, over every filter.
    assert acting.search(session=session, actor=vera, query=ONLY_IN_B) == []
    assert acting.search(session=session, actor=vera, query="zeppelin", match="any") == []
    assert [
        hit.document_id for hit in acting.search(session=session, actor=vera, query=ONLY_IN_A)
    ] == [world.a]
    ada = actor_of(world, Role.ADMIN)
    assert {h.document_id for h in acting.search(session=session, actor=ada, query=ONLY_IN_B)} == {
        world.b
    }
    # Listing and opening.
    assert [d.id for d in acting.list_documents(session=session, actor=vera)] == [world.a]
    assert [c.name for c in acting.list_collections(session=session, actor=vera)] == ["Matter A"]
    with pytest.raises(AccessRefused) as refused:
        acting.open_document(session=session, actor=vera, document_id=world.b)
    missing = world.loose + 1000
    with pytest.raises(AccessRefused) as absent:
        acting.open_document(session=session, actor=vera, document_id=missing)
    # Refused and missing read alike: the sentence never tells that b exists.
    assert str(refused.value).replace(str(world.b), "N") == str(absent.value).replace(
        str(missing), "N"
    )
    # Key facts: only A's.
    path = tmp_path / "facts.json"
    assert acting.export_facts(session=session, actor=vera, path=path) == 1
    exported = json.loads(path.read_text())
    assert [row["document_id"] for row in exported] == [world.a]
    assert "Iceland" not in path.read_text() and "Zeppelin" not in path.read_text()
    # What the log holds of all this: ids, counts and lengths, never the text.
    rows = audit.list_events(session=session, user_name="vera")
    searches = [row for row in rows if row.action == "search"]
    assert [row.details["num_hits"] for row in searches] == [0, 0, 1]
    assert searches[0].details["query_chars"] == len(ONLY_IN_B)
    _assert_no_text(session)


def _assert_no_text(session) -> None:
    dump = audit.render_csv(audit.list_events(session=session)).lower()
    for words in ("zeppelin", "orchard", "fence", "iceland", "vermont", "who?", "which?", PASSWORD):
        assert words not in dump


def test_sign_ins_are_logged_without_text_and_a_deleted_user_keeps_their_rows(
    session, world
) -> None:
    assert (
        accounts.sign_in(session=session, name="vera", password="wrong one", origin="ui 10.0.0.7")
        is None
    )
    assert (
        accounts.sign_in(session=session, name="nobody", password=PASSWORD, origin="ui 10.0.0.7")
        is None
    )
    signed = accounts.sign_in(session=session, name="vera", password=PASSWORD, origin="ui 10.0.0.7")
    assert signed is not None and signed.actor.role == Role.VIEWER
    ada = actor_of(world, Role.ADMIN)
    accounts.set_disabled(session=session, actor=ada, name="vera")
    session.commit()
    assert accounts.sign_in(session=session, name="vera", password=PASSWORD, origin="cli") is None
    holds = accounts.session_holds(
        session=session, user_id=world.user_ids[Role.VIEWER], signed_in_at=signed.at, max_age_s=3600
    )
    assert holds is None  # disabling ended the session
    accounts.delete_user(session=session, actor=ada, name="vera")
    session.commit()
    rows = [
        (r.action, r.outcome, r.origin)
        for r in audit.list_events(session=session, user_name="vera")
    ]
    assert rows == [
        ("sign_in", "failed", "ui 10.0.0.7"),
        ("sign_in", "ok", "ui 10.0.0.7"),
        ("sign_in", "failed", "cli"),
    ]
    assert [r.outcome for r in audit.list_events(session=session, user_name="nobody")] == ["failed"]
    changes = [r.action for r in audit.list_events(session=session, user_name="ada")]
    assert changes == ["user_disable", "user_delete"]
    _assert_no_text(session)


def test_sessions_expire_and_a_password_reset_ends_them(session, world) -> None:
    signed = accounts.sign_in(session=session, name="edna", password=PASSWORD, origin="ui")
    assert signed is not None
    edna_id = world.user_ids[Role.EDITOR]
    assert accounts.session_holds(
        session=session, user_id=edna_id, signed_in_at=signed.at, max_age_s=60
    )
    old = signed.at - timedelta(seconds=120)
    assert (
        accounts.session_holds(session=session, user_id=edna_id, signed_in_at=old, max_age_s=60)
        is None
    )
    accounts.reset_password(
        session=session, actor=actor_of(world, Role.ADMIN), name="edna", password="another long one"
    )
    session.commit()
    assert (
        accounts.session_holds(
            session=session, user_id=edna_id, signed_in_at=signed.at, max_age_s=60
        )
        is None
    )


def test_the_audit_log_refuses_updates_and_prunes_by_age(session, world) -> None:
    accounts.sign_in(session=session, name="ada", password="wrong one", origin="cli")
    with pytest.raises(DBAPIError):
        session.execute(text("UPDATE audit_events SET outcome = 'ok'"))
        session.commit()
    session.rollback()
    assert audit.prune(session=session, keep_days=1) == 0
    assert audit.prune(session=session, keep_days=1, now=utc_now() + timedelta(days=2)) == 1
    session.commit()
    assert audit.list_events(session=session) == []
    with pytest.raises(TypeError):  # text never gets in
        audit.record(
            session=session, who=access.local_admin().who, action="ask", details={"q": "Who?"}
        )


def test_grants_and_user_names_are_checked(session, world) -> None:
    ada = actor_of(world, Role.ADMIN)
    with pytest.raises(accounts.AccountError, match="viewer may only read"):
        accounts.grant(
            session=session,
            actor=ada,
            name="vera",
            collection_id=world.collection_b,
            can_write=True,
        )
    with pytest.raises(accounts.AccountError, match="at least 8"):
        accounts.add_user(session=session, actor=ada, name="x", role=Role.VIEWER, password="short")
    with pytest.raises(accounts.AccountError, match="user name"):
        accounts.add_user(
            session=session, actor=ada, name="=cmd()", role=Role.VIEWER, password=PASSWORD
        )
    accounts.grant(
        session=session, actor=ada, name="vera", collection_id=world.collection_b, can_write=False
    )
    session.commit()
    vera = actor_of(world, Role.VIEWER)
    assert {h.document_id for h in acting.search(session=session, actor=vera, query=ONLY_IN_B)} == {
        world.b
    }
    assert accounts.revoke(
        session=session, actor=ada, name="vera", collection_id=world.collection_b
    )
    session.commit()
    assert acting.search(session=session, actor=vera, query=ONLY_IN_B) == []
    assert session.get(User, world.user_ids[Role.VIEWER]).password_hash.startswith("$argon2id$")
