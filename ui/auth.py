"""Signing in to the UI: a user name and password (accounts, issue 25; app/services/accounts.py),
or an identity provider where one is set up (ui/oidc.py).

The shared UI password of before accounts, a PBKDF2 hash in LONGDOC_UI_PASSWORD_HASH, becomes
the first admin's ("admin"). `python -m ui.auth` still prints such a hash; `longdoc users` is
the way to manage accounts. Format: "pbkdf2_sha256$<iterations>$<salt, base64>$<hash, base64>"
(Django's, so tools exist).
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import hmac
import secrets
import sys
import time
from typing import TYPE_CHECKING

from app.services import access, accounts, oidc_sign_in
from app.services.access import Actor
from ui import sign_in_limits as limits
from ui import signed_in

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.settings import Settings

ALGORITHM = "pbkdf2_sha256"
DEFAULT_ITERATIONS = 600_000  # OWASP's 2023 figure for PBKDF2-HMAC-SHA256
# A wrong password costs the guesser this long on top of the hash itself.
FAILURE_DELAY_S = 1.0


def hash_password(password: str, *, iterations: int = DEFAULT_ITERATIONS) -> str:
    if not password:
        raise ValueError("the password is empty")
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{ALGORITHM}${iterations}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether `password` matches `encoded`; False for any malformed hash."""
    try:
        algorithm, iterations, salt, expected = encoded.split("$")
        if algorithm != ALGORITHM:
            return False
        digest = hashlib.pbkdf2_hmac("sha256", password.encode(), _unb64(salt), int(iterations))
        return hmac.compare_digest(digest, _unb64(expected))
    except (ValueError, TypeError):
        return False


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


SESSION_USER = "signed_in_user_id"
SESSION_AT = "signed_in_at"
SESSION_ACTOR = "actor"
WRONG = "That user name or password is not right."
SESSION_ENDED = oidc_sign_in.SESSION_OVER


def require_login(settings: Settings) -> Actor | None:
    """The signed-in user (accounts, issue 25), or None after showing the sign-in form.

    A database without users and without the shared UI password is open, as before accounts:
    everyone is the local admin. The shared password becomes the first admin ("admin") on
    first use. A session ends when it is older than LONGDOC_SESSION_MAX_AGE_S, at sign-out, and
    when its user is disabled or their password reset. Attempts are limited per client and for
    everyone, and hashing is bounded (ui/sign_in_limits.py); a signed-in session whose user may
    upload may send files (ui/upload_gate.py). With LONGDOC_OIDC_ISSUER_URL set, a person the
    identity provider signed in starts such a session too (ui/oidc.py). Streamlit is imported
    here, not at the top, so the hashing functions work without it.
    """
    import streamlit as st

    from ui import context as ctx

    origin = f"ui {_client_key()}"
    with ctx.session() as db:
        accounts.ensure_first_admin(session=db, password_hash=settings.ui_password_hash)
        is_open = accounts.count_users(session=db) == 0
        actor = access.local_admin(origin) if is_open else _current(db, settings, origin)
        if actor is None and not is_open and settings.is_oidc_enabled:
            actor = _from_provider(db, settings, origin)
        may_upload = actor is not None and access.can(session=db, actor=actor, action="upload")
    if actor is not None:
        st.session_state[SESSION_ACTOR] = actor
        signed_in.add(_session_id(), may_upload=may_upload)
        return actor
    _sign_in_form(settings, origin)
    return None


def _from_provider(db: Session, settings: Settings, origin: str) -> Actor | None:
    """A session begun by the identity provider's sign-in (ui/oidc.py), now LongDoc's own."""
    import streamlit as st

    from ui import oidc

    signed = oidc.sign_in(db, settings, origin)
    if signed is None:
        return None
    st.session_state[SESSION_USER] = signed.actor.user_id
    st.session_state[SESSION_AT] = signed.at
    return signed.actor


def _current(db: Session, settings: Settings, origin: str) -> Actor | None:
    import streamlit as st

    user_id, at = st.session_state.get(SESSION_USER), st.session_state.get(SESSION_AT)
    if user_id is None or at is None:
        return None
    actor = accounts.session_holds(
        session=db, user_id=user_id, signed_in_at=at, max_age_s=settings.session_max_age_s
    )
    if actor is None:
        end_session()
        st.session_state["session_ended"] = True
        return None
    return actor.coming_from(origin)


def end_session() -> None:
    """Forget this browser session's sign-in (sign-out, or a session that is over)."""
    import streamlit as st

    for key in (SESSION_USER, SESSION_AT, SESSION_ACTOR):
        st.session_state.pop(key, None)
    signed_in.remove(_session_id())


def sign_out() -> None:
    """End this session, and the identity provider's cookie when the browser holds one."""
    import streamlit as st

    from ui import context as ctx
    from ui import oidc

    actor = st.session_state.get(SESSION_ACTOR)
    if actor is not None and actor.user_id is not None:
        with ctx.session() as db:
            accounts.record_sign_out(session=db, actor=actor)
    end_session()
    oidc.end_provider_session()


def _sign_in_form(settings: Settings, origin: str) -> None:
    import streamlit as st

    from ui import oidc

    _, middle, _ = st.columns([1, 2, 1])
    with middle:
        st.title("LongDoc")
        st.caption("Faithful summaries and cited answers for long legal and medical PDFs.")
        has_ended = st.session_state.pop("session_ended", False)
        if settings.is_oidc_enabled:
            oidc.render_choice(settings, has_ended=has_ended)
        elif has_ended:
            st.info(SESSION_ENDED)
        with st.form("sign-in"):
            name = st.text_input("User name", max_chars=100)
            password = st.text_input("Password", type="password")
            submitted = st.form_submit_button("Sign in", type="primary")
        if submitted:
            result = _attempt(name.strip(), password, _client_key(), origin)
            if isinstance(result, accounts.SignIn):
                st.session_state[SESSION_USER] = result.actor.user_id
                st.session_state[SESSION_AT] = result.at
                signed_in.add(_session_id())
                st.rerun()
            st.error(result)


def _attempt(name: str, password: str, client: str, origin: str) -> accounts.SignIn | str:
    """The sign-in when the name and password are right; else the sentence to show. Every
    attempt is in the audit log (ok, failed, locked)."""
    from ui import context as ctx

    try:
        limits.limiter.check(client)
        with limits.limiter.hashing(), ctx.session() as db:
            signed = accounts.sign_in(session=db, name=name, password=password, origin=origin)
    except limits.SignInRefused as refused:
        with ctx.session() as db:
            accounts.record_locked(session=db, name=name, origin=origin)
        return str(refused)
    if signed is not None:
        limits.limiter.record_success(client)
        return signed
    limits.limiter.record_failure(client)
    time.sleep(FAILURE_DELAY_S)
    return WRONG


def _client_key() -> str:
    """The client's address; one key for every session on this machine (Streamlit gives no
    address for loopback). Behind a reverse proxy every client shares the proxy's address."""
    import streamlit as st

    return st.context.ip_address or "this machine"


def _session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    context = get_script_run_ctx()
    return context.session_id if context is not None else ""


def main() -> None:
    first = getpass.getpass("New UI password: ")
    if not first:
        sys.exit("The password is empty.")
    if getpass.getpass("Again: ") != first:
        sys.exit("The two passwords differ.")
    print(hash_password(first))


if __name__ == "__main__":
    main()
