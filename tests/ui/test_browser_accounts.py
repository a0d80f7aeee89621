"""Accounts in a real browser (Debian's chromium driven by Playwright, against `python -m
ui.launch`): a viewer of collection A follows a link to B's document, signs in by name and
password, and is refused there; the same link opens for the admin; the sidebar says who is
signed in, and A's document opens for the viewer."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.db.session import make_engine, session_factory
from tests.app.access_world import ONLY_IN_A, PASSWORD, build_world
from tests.ui.live_ui import UIProcess
from tests.ui.test_browser_e2e import CHROMIUM, CHROMIUM_ARGS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


def test_a_viewer_following_a_link_to_another_collection_s_document_is_refused(
    tmp_path: Path,
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    ui = UIProcess(tmp_path)
    engine = make_engine(f"sqlite:///{tmp_path / 'ui.db'}")
    try:
        with session_factory(engine)() as session:
            world = build_world(session)
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            try:
                for name, shown in (("vera", "that you may open"), ("ada", "Zeppelin Merger")):
                    page = browser.new_page(viewport={"width": 1280, "height": 900})
                    page.set_default_timeout(60_000)
                    page.goto(f"{ui.base}/document?doc={world.b}")
                    page.get_by_label("User name", exact=True).fill(name)
                    page.get_by_label("Password", exact=True).fill(PASSWORD)
                    page.get_by_role("button", name="Sign in").click()
                    page.get_by_text(shown).first.wait_for()  # the link's page, once signed in
                    if name == "vera":
                        assert page.get_by_text("Zeppelin").count() == 0
                        page.get_by_text("vera (viewer)").wait_for()
                        page.goto(f"{ui.base}/document?doc={world.a}")  # a new session
                        page.get_by_label("User name", exact=True).fill(name)
                        page.get_by_label("Password", exact=True).fill(PASSWORD)
                        page.get_by_role("button", name="Sign in").click()
                        page.get_by_text("Orchard Lease").first.wait_for()
                    page.close()
            finally:
                browser.close()
    finally:
        engine.dispose()
        ui.stop()
    assert ONLY_IN_A not in ui.log()
