"""Sign-in through an identity provider on the sign-in page (Streamlit's st.login; issue 25).

With LONGDOC_OIDC_ISSUER_URL set, the sign-in page offers "Sign in with <provider>" above the
local form. Streamlit sends the browser to the provider and back, and keeps who signed in
there in its own signed cookie (st.user). Each new browser session holding that cookie is
matched to a LongDoc user (app/services/oidc_sign_in.py) and becomes an ordinary LongDoc
session: the same expiry (from the ID token's issue time), ended by a disable or a password
reset; sign-out ends the provider's cookie too (st.logout, ui/auth.py). A refusal is shown in
a sentence with a button to sign out of the provider (to try another account); it is logged
once per browser session. The [auth] secrets Streamlit needs are written by ui/oidc_secrets.py.
"""

from __future__ import annotations

import streamlit as st
from sqlalchemy.orm import Session

from app.services import oidc_sign_in
from app.services.accounts import SignIn
from app.settings import Settings

# This browser session's refusal or ended session, so that reruns neither log it again nor
# sign in from the same cookie.
OUTCOME = "oidc_outcome"
REFUSED = "refused"
NOT_SET_UP = (
    "Sign-in through {name} is not set up in this UI server: start it with `longdoc up --ui` "
    "or `python -m ui.launch`, which hand Streamlit the LONGDOC_OIDC_* settings."
)


def provider_claims() -> dict[str, object] | None:
    """What the provider said of the person signed in there (st.user), or None."""
    claims = st.user.to_dict()
    return claims if claims.get("is_logged_in") is True else None


def sign_in(db: Session, settings: Settings, origin: str) -> SignIn | None:
    """The LongDoc sign-in of this browser session's provider identity; None when there is
    none, or it was refused or had ended (the sign-in page then says which)."""
    claims = provider_claims()
    if claims is None or OUTCOME in st.session_state:
        return None
    try:
        return oidc_sign_in.sign_in(
            session=db,
            claims=claims,
            user_claim=settings.oidc_user_claim,
            origin=origin,
            max_age_s=settings.session_max_age_s,
            auto_create_role=settings.oidc_auto_create_role,
        )
    except oidc_sign_in.ProviderSessionOver as over:
        st.session_state[OUTCOME] = (str(over), False)
    except oidc_sign_in.ProviderSignInRefused as refused:
        st.session_state[OUTCOME] = (str(refused), True)
    return None


def render_choice(settings: Settings, *, has_ended: bool) -> None:
    """The provider's button, and what became of this session's provider sign-in (or of the
    LongDoc session that `has_ended`)."""
    name = settings.oidc_provider_name
    sentence, is_refused = st.session_state.get(OUTCOME, ("", False))
    if is_refused:
        st.error(sentence, icon=":material/block:")
        if st.button(f"Sign out of {name}", icon=":material/logout:"):
            st.logout()
    elif sentence or has_ended:
        st.info(sentence or oidc_sign_in.SESSION_OVER)
    if st.button(f"Sign in with {name}", type="primary", icon=":material/key:"):
        _login(name)
    st.caption("Or with a LongDoc user name and password:")


def _login(name: str) -> None:
    from streamlit.errors import StreamlitAuthError

    try:
        st.login()
    except StreamlitAuthError:
        st.error(NOT_SET_UP.format(name=name))


def end_provider_session() -> None:
    """Sign out of the provider's cookie as well, when this browser holds one. st.logout sends
    the browser to Streamlit's logout page (which clears the identity cookie, then goes on to
    the provider's end-session page or back here) by a message queued in this run: the run
    stops here, since a rerun started now could drop that message and leave the cookie (a new
    tab would then sign the person in again)."""
    if provider_claims() is not None:
        st.logout()
        st.stop()
