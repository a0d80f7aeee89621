"""The optional UI password: a PBKDF2 hash in settings, checked once per browser session.

`python -m ui.auth` asks for a password and prints the hash to put in LONGDOC_UI_PASSWORD_HASH.
Format: "pbkdf2_sha256$<iterations>$<salt, base64>$<hash, base64>" (Django's, so tools exist).
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import hmac
import secrets
import sys
import time

from ui import sign_in_limits as limits
from ui import signed_in

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


def require_login(password_hash: str) -> bool:
    """Show the sign-in form unless this session has signed in. True when the page may render.

    Attempts are limited per client and for everyone, and hashing is bounded
    (ui/sign_in_limits.py); a signed-in session may upload (ui/upload_gate.py). Streamlit is
    imported here, not at the top, so the hashing functions work without it.
    """
    import streamlit as st

    if not password_hash or st.session_state.get("is_signed_in"):
        return True
    _, middle, _ = st.columns([1, 2, 1])
    with middle:
        st.title("LongDoc")
        st.caption("Faithful summaries and cited answers for long legal and medical PDFs.")
        with st.form("sign-in"):
            password = st.text_input("Password", type="password")
            submitted = st.form_submit_button("Sign in", type="primary")
        if submitted:
            sentence = _attempt(password, password_hash, _client_key())
            if sentence is None:
                st.session_state["is_signed_in"] = True
                signed_in.add(_session_id())
                st.rerun()
            st.error(sentence)
    return False


def _attempt(password: str, password_hash: str, client: str) -> str | None:
    """None when the password is right; else the sentence to show."""
    try:
        limits.limiter.check(client)
        with limits.limiter.hashing():
            is_right = verify_password(password, password_hash)
    except limits.SignInRefused as refused:
        return str(refused)
    if is_right:
        limits.limiter.record_success(client)
        return None
    limits.limiter.record_failure(client)
    time.sleep(FAILURE_DELAY_S)
    return "That password is not right."


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
