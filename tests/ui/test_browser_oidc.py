"""Sign-in through an identity provider, end to end: a real OpenID Connect provider
(oidc-provider-mock, in a thread of this test), `python -m ui.launch` configured for it by the
LONGDOC_OIDC_* settings alone, and Debian's chromium driven by Playwright. A known person
clicks "Sign in with <provider>", signs in on the provider's own form, lands signed in as their
LongDoc user, and signs out of both; an unknown one is refused with a sentence. The audit log
has each, marked oidc, and no secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.db.models import Role
from app.db.session import make_engine, session_factory
from app.services import accounts, audit
from app.services.access import local_admin
from tests.ui.live_ui import UIProcess
from tests.ui.test_browser_e2e import CHROMIUM, CHROMIUM_ARGS

PROVIDER = "Firm Login"
CLIENT_SECRET = "client-secret-never-shown"
TIMEOUT_MS = 60_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


def _sign_in_at_provider(page, ui: UIProcess, who: str) -> None:
    page.goto(ui.base)
    page.get_by_role("button", name=f"Sign in with {PROVIDER}").click()
    page.locator("input[name=sub]").fill(who)  # the provider's own sign-in form
    page.get_by_role("button", name="Authorize").click()


def test_a_person_signs_in_through_the_provider_and_an_unknown_one_is_refused(
    tmp_path: Path,
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    provider_mock = pytest.importorskip("oidc_provider_mock", reason="pip install -e .[dev]")
    with provider_mock.run_server_in_thread() as provider:
        ui = UIProcess(
            tmp_path,
            LONGDOC_OIDC_ISSUER_URL=f"http://127.0.0.1:{provider.server_port}",
            LONGDOC_OIDC_CLIENT_ID="longdoc",
            LONGDOC_OIDC_CLIENT_SECRET=CLIENT_SECRET,
            LONGDOC_OIDC_REDIRECT_URI="http://127.0.0.1:{port}/oauth2callback",
            LONGDOC_OIDC_PROVIDER_NAME=PROVIDER,
        )
        engine = make_engine(f"sqlite:///{tmp_path / 'ui.db'}")
        try:
            with session_factory(engine)() as session:
                accounts.add_user(
                    session=session,
                    actor=local_admin("test"),
                    name="vera@firm.test",
                    role=Role.VIEWER,
                    password="a long password",
                )
                session.commit()
            with sync_api.sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
                )
                try:
                    context = browser.new_context()
                    page = context.new_page()
                    page.set_default_timeout(TIMEOUT_MS)
                    _sign_in_at_provider(page, ui, "vera@firm.test")
                    page.get_by_text("vera@firm.test (viewer)").wait_for()
                    page.get_by_role("button", name="Sign out").click()
                    # Streamlit clears its identity cookie, and sends the browser to the
                    # provider's end-session page when it holds the provider's metadata (not
                    # always yet: then straight back to LongDoc's sign-in page).
                    end = page.get_by_role("button", name="End session")
                    sign_in = page.get_by_role("button", name=f"Sign in with {PROVIDER}")
                    end.or_(sign_in).wait_for()
                    if end.is_visible():
                        end.click()
                    sign_in.wait_for()
                    assert page.get_by_text("vera@firm.test (viewer)").count() == 0
                    # A new tab of this browser (its cookies, a new Streamlit session) starts
                    # signed out: had the identity cookie stayed, it would sign in at once.
                    again = context.new_page()
                    again.goto(ui.base)
                    again.get_by_role("button", name=f"Sign in with {PROVIDER}").wait_for()
                    assert again.get_by_text("vera@firm.test (viewer)").count() == 0

                    stranger = browser.new_context().new_page()
                    stranger.set_default_timeout(TIMEOUT_MS)
                    _sign_in_at_provider(stranger, ui, "mallory@else.test")
                    stranger.get_by_text("LongDoc has no user of that name").wait_for()
                    stranger.get_by_role("button", name=f"Sign out of {PROVIDER}").wait_for()
                finally:
                    browser.close()
            with session_factory(engine)() as session:
                events = audit.list_events(session=session)
                rows = [(e.user_name, e.action, e.outcome, e.details) for e in events]
                exported = audit.render_csv(events)
        finally:
            engine.dispose()
            ui.stop()
    assert [row for row in rows if row[1] in ("sign_in", "sign_out")] == [
        ("vera@firm.test", "sign_in", "ok", {"oidc": True}),
        ("vera@firm.test", "sign_out", "ok", {}),
        ("mallory@else.test", "sign_in", "failed", {"oidc": True}),
    ]
    assert CLIENT_SECRET not in exported and CLIENT_SECRET not in ui.log()
