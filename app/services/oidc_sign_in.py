"""Sign-in through an identity provider (OpenID Connect): who the provider's ID token names,
and which LongDoc user that is.

The provider proves who the person is; LongDoc still decides what they may do. One claim of
the ID token (LONGDOC_OIDC_USER_CLAIM: email by default, or preferred_username, or sub) must
equal the name of an enabled LongDoc user, letter case aside (an exact match wins; two users
differing only in case match neither). Only that one claim is read, so that a person cannot
choose, say, a preferred_username of "admin" at a provider and become LongDoc's admin when
users are matched by email. An email the provider marks unverified (email_verified false) is
refused.

Without such a user the sign-in is refused, unless LONGDOC_OIDC_AUTO_CREATE_ROLE is "viewer":
then the person becomes a new viewer with no grants (an admin grants collections later) and
no password (local sign-in never matches it; `longdoc users reset-password` gives one).
Admins and editors are never created here.

A session that began at the provider is a LongDoc session from the ID token's issue time
(`iat`): it ends LONGDOC_SESSION_MAX_AGE_S later, and is over when the user is disabled or
their password reset after it, exactly as a local one (accounts.session_holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Role, User, utc_now
from app.services import audit
from app.services.accounts import (
    AccountError,
    SignIn,
    actor_for,
    find_user,
    is_valid_user_name,
)
from app.services.audit import Who

USER_CLAIMS = ("email", "preferred_username", "sub")
# Never an argon2 or PBKDF2 hash: no password verifies against it (app/services/passwords.py).
NO_PASSWORD = "!oidc: no local password"
# Written in the log rows of these sign-ins (details), beside the local ones.
OIDC_DETAIL = "oidc"
SESSION_OVER = "Your session has ended; sign in again."


class ProviderSignInRefused(AccountError):
    """The provider signed the person in, but LongDoc does not let them in; the sentence says
    why (no such user, a disabled one, an unusable token)."""

    code = "provider_sign_in_refused"


class ProviderSessionOver(AccountError):
    """The provider's sign-in is older than a LongDoc session may last, or older than the
    user's last disable or password reset: sign in at the provider again."""

    code = "provider_session_over"


@dataclass(frozen=True)
class Identity:
    """Whom the ID token names (the value of the claim users are matched by), and when the
    provider issued it (the session's start)."""

    name: str
    issued_at: datetime


def identity_from_claims(claims: Mapping[str, Any], *, user_claim: str) -> Identity:
    """The identity of an ID token's claims (st.user); ProviderSignInRefused when the claim or
    the issue time is missing, or the email unverified."""
    if user_claim not in USER_CLAIMS:
        raise ValueError(f"unknown user claim {user_claim!r}")
    value = claims.get(user_claim)
    name = value.strip() if isinstance(value, str) else ""
    if not name:
        raise ProviderSignInRefused(
            f"The identity provider did not say your {user_claim}, which LongDoc matches "
            "users by; ask whoever runs LongDoc."
        )
    if user_claim == "email" and claims.get("email_verified") is False:
        raise ProviderSignInRefused(
            f"The identity provider has not verified the email {name}; verify it there first."
        )
    issued = claims.get("iat")
    if not isinstance(issued, int | float) or isinstance(issued, bool):
        raise ProviderSignInRefused(
            "The identity provider's token says nothing of when it was issued; LongDoc cannot "
            "tell when the session ends. Ask whoever runs LongDoc."
        )
    # A provider whose clock runs ahead does not make a session last longer.
    issued_at = min(datetime.fromtimestamp(issued, UTC), utc_now())
    return Identity(name=name[:100], issued_at=issued_at)


def matching_user(*, session: Session, name: str) -> User | None:
    """The user named `name`; else the one user whose name equals it but for letter case."""
    exact = find_user(session=session, name=name)
    if exact is not None:
        return exact
    found = list(
        session.scalars(select(User).where(func.lower(User.name) == name.lower()).limit(2))
    )
    return found[0] if len(found) == 1 else None


def sign_in(
    *,
    session: Session,
    claims: Mapping[str, Any],
    user_claim: str,
    origin: str,
    max_age_s: float,
    auto_create_role: str = "none",
) -> SignIn:
    """The LongDoc sign-in of a person the provider signed in (the claims of their ID token);
    every refusal and every success is in the audit log (committed). ProviderSessionOver for
    a token too old to start a session (not logged: nothing new was attempted),
    ProviderSignInRefused for everything else."""
    try:
        identity = identity_from_claims(claims, user_claim=user_claim)
    except ProviderSignInRefused:
        value = claims.get(user_claim)
        _record(session, value if isinstance(value, str) else "", None, origin, audit.FAILED)
        raise
    if utc_now() - identity.issued_at > timedelta(seconds=max_age_s):
        raise ProviderSessionOver(SESSION_OVER)
    user = matching_user(session=session, name=identity.name)
    if user is None and auto_create_role == Role.VIEWER.value:
        user = _new_viewer(session, identity, origin)
    if user is None or user.is_disabled:
        _record(session, identity.name, user, origin, audit.FAILED)
        if user is None:
            raise ProviderSignInRefused(
                f"You signed in as {identity.name}, but LongDoc has no user of that name. Ask "
                "an admin to add one (`longdoc users add`)."
            )
        raise ProviderSignInRefused(f"The LongDoc user {user.name} is disabled.")
    if identity.issued_at < user.sessions_valid_after:
        raise ProviderSessionOver(SESSION_OVER)
    _record(session, identity.name, user, origin, audit.OK)
    return SignIn(actor=actor_for(user, origin), at=identity.issued_at)


def _new_viewer(session: Session, identity: Identity, origin: str) -> User | None:
    """A viewer named after the identity, with no grants and no password; None when the name
    is not one a LongDoc user may have."""
    if not is_valid_user_name(identity.name):
        return None
    # Sessions from this token on hold: the default (now) would already have ended this one.
    user = User(
        name=identity.name,
        role=Role.VIEWER,
        password_hash=NO_PASSWORD,
        sessions_valid_after=min(identity.issued_at, utc_now()),
    )
    session.add(user)
    session.flush()
    audit.record(
        session=session,
        who=Who(user_id=None, name="identity provider", origin=origin),
        action="user_add",
        target_kind="user",
        target_ids=[user.id],
        details={OIDC_DETAIL: True},
    )
    return user


def _record(session: Session, name: str, user: User | None, origin: str, outcome: str) -> None:
    details: dict[str, int | float | bool] = {OIDC_DETAIL: True}
    if user is not None and user.is_disabled:
        details["is_disabled"] = True
    audit.record(
        session=session,
        # The user's own name when matched, so `longdoc audit --user` finds these rows.
        who=Who(user_id=user.id if user else None, name=user.name if user else name, origin=origin),
        action="sign_in",
        outcome=outcome,
        details=details,
    )
    session.commit()
