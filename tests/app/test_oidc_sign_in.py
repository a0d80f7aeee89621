"""Sign-in through an identity provider (app/services/oidc_sign_in.py), on SQLite and
PostgreSQL: which LongDoc user an ID token's claims name, who is refused, the audit rows, and
sessions that end as local ones do."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.db.models import AuditEvent, CollectionGrant, Role, User, utc_now
from app.services import accounts, oidc_sign_in, passwords
from app.services.access import local_admin
from app.services.oidc_sign_in import ProviderSessionOver, ProviderSignInRefused

HOUR = 3600.0


def _user(session, name: str, role: Role = Role.EDITOR, *, is_disabled: bool = False) -> User:
    user = User(name=name, role=role, password_hash=oidc_sign_in.NO_PASSWORD)
    user.is_disabled = is_disabled
    user.sessions_valid_after = utc_now() - timedelta(days=1)
    session.add(user)
    session.commit()
    return user


def _claims(value: str, *, claim: str = "email", age_s: float = 5.0, **more) -> dict:
    issued = (utc_now() - timedelta(seconds=age_s)).timestamp()
    return {"is_logged_in": True, "sub": "provider-id-1", claim: value, "iat": int(issued), **more}


def _sign_in(session, claims: dict, *, user_claim: str = "email", auto_create_role="none"):
    return oidc_sign_in.sign_in(
        session=session,
        claims=claims,
        user_claim=user_claim,
        origin="ui 10.0.0.7",
        max_age_s=HOUR,
        auto_create_role=auto_create_role,
    )


def _sign_in_rows(session) -> list[AuditEvent]:
    query = select(AuditEvent).where(AuditEvent.action == "sign_in").order_by(AuditEvent.id)
    return list(session.scalars(query))


def test_the_claim_names_the_user_and_the_session_starts_at_the_token_s_issue(session) -> None:
    user = _user(session, "edna@firm.test")
    claims = _claims("Edna@Firm.test")  # the provider's spelling; case does not matter
    signed = _sign_in(session, claims)
    assert signed.actor.user_id == user.id and signed.actor.role == Role.EDITOR
    assert int(signed.at.timestamp()) == claims["iat"]
    (row,) = _sign_in_rows(session)
    assert (row.outcome, row.user_id, row.user_name) == ("ok", user.id, "edna@firm.test")
    assert row.details == {"oidc": True} and row.origin == "ui 10.0.0.7"
    # From then on it is a LongDoc session like any other.
    held = accounts.session_holds(
        session=session, user_id=user.id, signed_in_at=signed.at, max_age_s=HOUR
    )
    assert held is not None and held.name == "edna@firm.test"


def test_only_the_configured_claim_is_read(session) -> None:
    _user(session, "admin", Role.ADMIN)
    # A person who calls themselves "admin" at the provider is not LongDoc's admin by email.
    claims = _claims("mallory@else.test", preferred_username="admin")
    with pytest.raises(ProviderSignInRefused, match="has no user of that name"):
        _sign_in(session, claims)
    (row,) = _sign_in_rows(session)
    assert (row.outcome, row.user_id, row.user_name) == ("failed", None, "mallory@else.test")
    # Matched by preferred_username, where the operator chose to trust it, it is.
    by_username = _claims("admin", claim="preferred_username")
    signed = _sign_in(session, by_username, user_claim="preferred_username")
    assert signed.actor.is_admin


def test_an_exact_name_wins_and_names_equal_but_for_case_match_neither(session) -> None:
    exact = _user(session, "Pat@firm.test")
    _user(session, "pat@firm.test")
    assert _sign_in(session, _claims("Pat@firm.test")).actor.user_id == exact.id
    with pytest.raises(ProviderSignInRefused, match="no user"):
        _sign_in(session, _claims("PAT@FIRM.TEST"))


def test_unknown_disabled_and_unusable_identities_are_refused_and_logged(session) -> None:
    _user(session, "dora@firm.test", is_disabled=True)
    with pytest.raises(ProviderSignInRefused, match=r"dora@firm\.test is disabled"):
        _sign_in(session, _claims("dora@firm.test"))
    with pytest.raises(ProviderSignInRefused, match="has not verified"):
        _sign_in(session, _claims("dora@firm.test", email_verified=False))
    with pytest.raises(ProviderSignInRefused, match="did not say your email"):
        _sign_in(session, {"is_logged_in": True, "sub": "x", "iat": int(utc_now().timestamp())})
    with pytest.raises(ProviderSignInRefused, match="when it was issued"):
        _sign_in(session, {"is_logged_in": True, "email": "dora@firm.test"})
    rows = _sign_in_rows(session)
    assert [row.outcome for row in rows] == ["failed"] * 4
    assert rows[0].details == {"oidc": True, "is_disabled": True}
    assert all(row.details["oidc"] for row in rows)
    assert session.scalar(select(User).where(User.name == "")) is None


def test_a_token_older_than_a_session_or_than_a_disable_starts_no_session(session) -> None:
    _user(session, "vera@firm.test", Role.VIEWER)
    with pytest.raises(ProviderSessionOver):
        _sign_in(session, _claims("vera@firm.test", age_s=HOUR + 60))
    claims = _claims("vera@firm.test", age_s=30)
    signed = _sign_in(session, claims)
    admin = local_admin("test")
    accounts.set_disabled(session=session, actor=admin, name="vera@firm.test")
    accounts.set_disabled(session=session, actor=admin, name="vera@firm.test", is_disabled=False)
    session.commit()
    held = accounts.session_holds(
        session=session, user_id=signed.actor.user_id, signed_in_at=signed.at, max_age_s=HOUR
    )
    assert held is None  # the disable ended it, and the same token cannot start another
    with pytest.raises(ProviderSessionOver):
        _sign_in(session, claims)
    assert [row.outcome for row in _sign_in_rows(session)] == ["ok"]  # ended ones: no row
    # A token issued after the disable (whole seconds: the next one) does.
    later = _claims("vera@firm.test", age_s=-1)
    assert _sign_in(session, later).actor.name == "vera@firm.test"


def test_auto_create_makes_a_viewer_without_grants_or_password(session) -> None:
    with pytest.raises(ProviderSignInRefused):
        _sign_in(session, _claims("new@firm.test"))  # the default: nobody is created
    assert session.scalar(select(User).where(User.name == "new@firm.test")) is None

    signed = _sign_in(session, _claims("new@firm.test"), auto_create_role="viewer")
    user = session.get(User, signed.actor.user_id)
    assert user is not None and (user.name, user.role) == ("new@firm.test", Role.VIEWER)
    assert session.scalars(select(CollectionGrant)).all() == []
    assert not passwords.verify_password("", user.password_hash)
    assert not passwords.verify_password(oidc_sign_in.NO_PASSWORD, user.password_hash)
    added = session.scalar(select(AuditEvent).where(AuditEvent.action == "user_add"))
    assert added is not None and added.target_ids == [user.id] and added.details == {"oidc": True}
    # The second sign-in finds the same user; a name no user may have is never created.
    assert _sign_in(session, _claims("new@firm.test"), auto_create_role="viewer").actor.user_id == (
        user.id
    )
    with pytest.raises(ProviderSignInRefused):
        _sign_in(session, _claims("a+b@firm.test"), auto_create_role="viewer")
    assert len(session.scalars(select(User)).all()) == 1
