"""Sign-in through an identity provider on the sign-in page (ui/oidc.py, AppTest): the
provider's button beside the local form, a provider identity (st.user, seeded as Streamlit's
cookie would give it) signed in as its LongDoc user, refused with a sentence, ended as a local
session is, and signed out of both. The real provider and browser: test_browser_oidc.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.db.models import utc_now
from app.services import accounts, audit
from app.services.access import local_admin
from app.settings import get_settings
from tests.app.access_world import World, build_world
from tests.ui.conftest import all_text

PROVIDER = "Keycloak"


@pytest.fixture
def world(sessions, ui_settings, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("LONGDOC_OIDC_ISSUER_URL", "http://127.0.0.1:9/realms/firm")
    monkeypatch.setenv("LONGDOC_OIDC_CLIENT_ID", "longdoc")
    monkeypatch.setenv("LONGDOC_OIDC_CLIENT_SECRET", "client-secret-value")
    monkeypatch.setenv("LONGDOC_OIDC_PROVIDER_NAME", PROVIDER)
    monkeypatch.setenv("LONGDOC_OIDC_USER_CLAIM", "preferred_username")
    get_settings.cache_clear()
    with sessions() as session:
        return build_world(session)


def _from_provider(app_test, name: str, *, age_s: float = -1.0):
    """An AppTest whose browser holds the provider's cookie for `name`; by default, from a
    token issued after the world's users were made (a token older than its user starts no
    session, as one older than a disable)."""
    at = app_test()
    issued = int((utc_now() - timedelta(seconds=age_s)).timestamp())
    at.user = {"is_logged_in": True, "preferred_username": name, "sub": "id-" + name, "iat": issued}
    return at


def _labels(at) -> list[str]:
    return [button.label for button in at.button]


def _sign_ins(sessions) -> list[tuple[str, str, str, dict]]:
    with sessions() as session:
        events = audit.list_events(session=session)
    return [(e.user_name, e.action, e.outcome, e.details) for e in events if "sign" in e.action]


def test_the_provider_s_button_stands_beside_the_local_form(app_test, world) -> None:
    at = app_test().run()
    assert not at.exception
    assert _labels(at) == [f"Sign in with {PROVIDER}", "Sign in"]
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    # This AppTest has no [auth] secrets (ui.launch writes them): a sentence, not a traceback.
    at.button[0].click().run()
    assert not at.exception and "not set up in this UI server" in all_text(at)


def test_a_provider_identity_becomes_its_user_and_sign_out_ends_both(
    app_test, sessions, world
) -> None:
    at = _from_provider(app_test, "vera").run()
    assert not at.exception
    assert "vera (viewer)" in " ".join(str(c.value) for c in at.sidebar.caption)
    at.run()  # reruns keep the session and log nothing more
    (sign_out,) = [b for b in at.sidebar.button if b.label == "Sign out"]
    sign_out.click().run()
    assert at.user["is_logged_in"] is False  # st.logout: the provider's cookie goes too
    assert not at.title  # the run stops there: the browser is on its way to the logout page
    at.run()  # back from it
    assert [t.value for t in at.title] == ["LongDoc"] and f"Sign in with {PROVIDER}" in _labels(at)
    assert _sign_ins(sessions) == [
        ("vera", "sign_in", "ok", {"oidc": True}),
        ("vera", "sign_out", "ok", {}),
    ]


def test_unknown_and_disabled_people_are_refused_once_with_a_sentence(
    app_test, sessions, world
) -> None:
    at = _from_provider(app_test, "mallory").run()
    at.run()
    text = all_text(at)
    assert "You signed in as mallory, but LongDoc has no user of that name" in text
    assert f"Sign out of {PROVIDER}" in _labels(at) and not at.sidebar.caption
    # edna is signed in by the provider; disabled, her session ends and her cookie is refused.
    at = _from_provider(app_test, "edna").run()
    assert "edna (editor)" in " ".join(str(c.value) for c in at.sidebar.caption)
    with sessions() as session:
        accounts.set_disabled(session=session, actor=local_admin(), name="edna")
        session.commit()
    at.run()
    assert "The LongDoc user edna is disabled." in all_text(at)
    assert [(name, outcome) for name, _, outcome, _ in _sign_ins(sessions)] == [
        ("mallory", "failed"),
        ("edna", "ok"),
        ("edna", "failed"),
    ]


def test_a_provider_sign_in_older_than_a_session_starts_none(app_test, sessions, world) -> None:
    max_age_s = get_settings().session_max_age_s
    at = _from_provider(app_test, "ada", age_s=max_age_s + 60).run()
    assert not at.exception and not at.sidebar.caption
    assert "Your session has ended; sign in again." in all_text(at)
    assert _sign_ins(sessions) == []
