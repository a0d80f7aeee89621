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

    Streamlit is imported here, not at the top, so the hashing functions work without it.
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
            if verify_password(password, password_hash):
                st.session_state["is_signed_in"] = True
                st.rerun()
            time.sleep(FAILURE_DELAY_S)
            st.error("That password is not right.")
    return False


def main() -> None:
    first = getpass.getpass("New UI password: ")
    if not first:
        sys.exit("The password is empty.")
    if getpass.getpass("Again: ") != first:
        sys.exit("The two passwords differ.")
    print(hash_password(first))


if __name__ == "__main__":
    main()
