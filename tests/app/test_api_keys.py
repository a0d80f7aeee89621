"""Users' API keys (app/services/api_keys.py, migration 0014) on SQLite and PostgreSQL: made by
an admin and shown once, stored as a hash, listed by prefix, revoked; a disabled user's keys stop
working; every change and every request leaves an audit row of ids and counts."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import ApiKey, Role
from app.services import accounts, api_keys, audit
from app.services.access import AccessRefused, local_admin

PASSWORD = "a long password"
ADMIN = local_admin("cli")


def _users(session: Session) -> None:
    for name, role in (("edna", Role.EDITOR), ("vera", Role.VIEWER)):
        accounts.add_user(session=session, actor=ADMIN, name=name, role=role, password=PASSWORD)
    session.commit()


def test_a_key_is_shown_once_stored_as_a_hash_and_works_until_revoked(session: Session) -> None:
    _users(session)
    assert not api_keys.has_active_keys(session=session)
    made = api_keys.create_key(session=session, actor=ADMIN, name="edna")
    session.commit()
    prefix, secret = made.key.prefix, made.secret
    assert secret.startswith(prefix + "_") and len(secret) >= len(prefix) + 43
    row = session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))
    assert row.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in (row.secret_sha256, row.prefix)
    user = api_keys.user_for_key(session=session, secret=secret)
    assert user is not None and user.name == "edna"
    for wrong in ("", prefix, secret[:-1], secret + "x", "ldk_", "some-machine-key"):
        assert api_keys.user_for_key(session=session, secret=wrong) is None
    assert api_keys.has_active_keys(session=session)

    other = api_keys.create_key(session=session, actor=ADMIN, name="vera")
    session.commit()
    assert other.key.prefix != prefix and other.secret != secret
    listed = api_keys.list_keys(session=session, actor=ADMIN)
    assert [(k.prefix, name) for k, name in listed] == [
        (prefix, "edna"),
        (other.key.prefix, "vera"),
    ]
    assert [k.prefix for k, _ in api_keys.list_keys(session=session, actor=ADMIN, name="vera")] == [
        other.key.prefix
    ]
    with pytest.raises(accounts.AccountError, match="no user named 'nobody'"):
        api_keys.list_keys(session=session, actor=ADMIN, name="nobody")

    assert api_keys.revoke_key(session=session, actor=ADMIN, prefix=prefix) is True
    session.commit()
    assert api_keys.user_for_key(session=session, secret=secret) is None
    assert api_keys.revoke_key(session=session, actor=ADMIN, prefix=prefix) is False
    with pytest.raises(accounts.AccountError, match="no API key 'ldk_00000000'"):
        api_keys.revoke_key(session=session, actor=ADMIN, prefix="ldk_00000000")

    # A disabled user's key stops working, and works again when they are enabled.
    assert api_keys.user_for_key(session=session, secret=other.secret) is not None
    accounts.set_disabled(session=session, actor=ADMIN, name="vera")
    session.commit()
    assert api_keys.user_for_key(session=session, secret=other.secret) is None
    assert not api_keys.has_active_keys(session=session)
    accounts.set_disabled(session=session, actor=ADMIN, name="vera", is_disabled=False)
    session.commit()
    assert api_keys.user_for_key(session=session, secret=other.secret) is not None

    events = [e for e in audit.list_events(session=session) if e.target_kind == "api_key"]
    assert [(e.action, e.target_ids) for e in events] == [
        ("api_key_create", [made.key.id]),
        ("api_key_create", [other.key.id]),
        ("api_key_revoke", [made.key.id]),
    ]
    assert all(e.user_name == ADMIN.name and e.origin == "cli" for e in events)


def test_only_an_admin_manages_keys_and_refusals_are_logged(session: Session) -> None:
    _users(session)
    edna = accounts.actor_for(accounts.require_user(session=session, name="edna"), "cli")
    made = api_keys.create_key(session=session, actor=ADMIN, name="edna")
    session.commit()
    with pytest.raises(AccessRefused):
        api_keys.create_key(session=session, actor=edna, name="edna")
    with pytest.raises(AccessRefused):
        api_keys.list_keys(session=session, actor=edna)
    with pytest.raises(AccessRefused):
        api_keys.revoke_key(session=session, actor=edna, prefix=made.key.prefix)
    session.commit()
    refused = audit.list_events(session=session, user_name="edna", outcome=audit.REFUSED)
    assert len(refused) == 3


def test_a_request_row_holds_ids_and_counts_and_the_key_is_marked_used(session: Session) -> None:
    _users(session)
    made = api_keys.create_key(session=session, actor=ADMIN, name="edna")
    session.commit()
    assert made.key.last_used_at is None
    edna = accounts.require_user(session=session, name="edna")
    api_keys.record_request(
        session=session,
        key_id=made.key.id,
        user_id=edna.id,
        user_name=edna.name,
        origin="serve tiny",
        outcome=audit.OK,
        num_prompt_tokens=12,
        num_completion_tokens=5,
    )
    session.commit()
    (event,) = audit.list_events(session=session, user_name="edna")
    assert (event.action, event.outcome, event.target_ids) == ("api_request", "ok", [made.key.id])
    assert event.details == {"prompt_tokens": 12, "completion_tokens": 5}
    assert (event.user_id, event.origin) == (edna.id, "serve tiny")
    session.refresh(made.key)
    assert made.key.last_used_at is not None


def test_deleting_a_user_deletes_their_keys(session: Session) -> None:
    _users(session)
    made = api_keys.create_key(session=session, actor=ADMIN, name="edna")
    session.commit()
    accounts.delete_user(session=session, actor=ADMIN, name="edna")
    session.commit()
    session.expire_all()
    assert api_keys.user_for_key(session=session, secret=made.secret) is None
    assert session.scalar(select(ApiKey)) is None
