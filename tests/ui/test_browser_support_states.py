"""The three support states in a real browser (Debian's chromium driven by Playwright) against
the running UI (`python -m ui.launch`): three answers stored through app/services in the UI's
own database, one per state, and the document's Questions tab shows each state's mark; a
partly supported answer says what is missing; a not supported one shows the best quote as the
answer, "quoted from p. N", with the model's own text set apart, folded, below it.
Screenshots go to test-output/ui-e2e/ (ignored by git)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import sessionmaker

from app.db.session import make_engine
from app.services.answer_labels import LABELS, MODEL_TEXT_TITLE
from tests.ui.live_ui import UIProcess
from tests.ui.seed import PAGE_SEPARATOR, add_answer, add_document
from tests.ui.test_browser_e2e import CHROMIUM, CHROMIUM_ARGS, SHOTS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="the browser test needs Debian's chromium at /usr/bin/chromium "
        "(apt-get install chromium); Playwright's own browser download is not used",
    ),
]

PAGES = [
    "Lease between Acme and Beta. The rent is 900 dollars a month.",
    "Either party may end the lease with three months notice. Notice must be written.",
    "This lease is governed by the laws of Ohio. Disputes go to the courts of Ohio.",
]
MISSING = "Partly supported: it does not say whether the lease renews."
MODEL_TEXT = "The Supreme Court of Nevada hears them."


def _quote(page: int, sentence: str) -> dict:
    offset = sum(len(text) + len(PAGE_SEPARATOR) for text in PAGES[: page - 1])
    start = offset + PAGES[page - 1].index(sentence)
    return {"text": sentence, "page": page, "start_char": start,
            "end_char": start + len(sentence), "passage_ordinal": 0, "score": 1.0}  # fmt: skip


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[UIProcess]:
    process = UIProcess(tmp_path)
    try:
        yield process
    finally:
        process.stop()
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / "support-states-ui.log").write_text(process.log())


def _exactly(label: str) -> re.Pattern[str]:
    """A badge's text: the label after its icon's name, case and all."""
    return re.compile(rf"(^|\s){re.escape(label)}$")


def _seed(database_url: str, files_dir: Path) -> int:
    """The document and its three answers, written through app/services into the UI's database."""
    engine = make_engine(database_url)
    try:
        with sessionmaker(bind=engine, expire_on_commit=False)() as session:
            document = add_document(session, files_dir, title="Office Lease", pages=PAGES)
            law = _quote(3, "This lease is governed by the laws of Ohio.")
            add_answer(session, document.id, "Which law governs?", "Ohio law governs [p. 3].",
                       [3], [], quotes=[law], support="supported")  # fmt: skip
            notice = _quote(2, "Either party may end the lease with three months notice.")
            add_answer(
                session, document.id, "When does the lease end, and does it renew?",
                "Either party may end it with three months notice [p. 2].", [2], [],
                quotes=[notice], support="partly_supported", stats={"support_missing": MISSING},
            )  # fmt: skip
            courts = _quote(3, "Disputes go to the courts of Ohio.")
            add_answer(
                session, document.id, "Which court hears disputes?",
                '"Disputes go to the courts of Ohio." (quoted from p. 3)', [3], [],
                quotes=[courts], support="unsupported", model_answer=MODEL_TEXT,
                unsupported_claims=["Supreme Court of Nevada"],
            )  # fmt: skip
            session.commit()
            return document.id
    finally:
        engine.dispose()


def test_the_three_support_states_in_chromium(ui: UIProcess, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    expect = sync_api.expect
    document_id = _seed(f"sqlite:///{tmp_path / 'ui.db'}", tmp_path / "data" / "files")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{ui.base}/document?doc={document_id}")
            page.get_by_role("tab").filter(has_text="Questions").click()
            answers = page.locator('[data-testid="stChatMessage"]').filter(visible=True)
            # Question and answer of each of the three, in the order they were stored.
            expect(answers).to_have_count(6)
            supported, partly, unsupported = answers.nth(1), answers.nth(3), answers.nth(5)

            states = {"supported": supported, "partly_supported": partly,
                      "unsupported": unsupported}  # fmt: skip
            colours = set()
            for status, answer in states.items():
                # The mark: its state's label, in its own colour, and no other state's label.
                mark = answer.get_by_text(_exactly(LABELS[status]))
                expect(mark).to_be_visible()
                colours.add(mark.evaluate("node => getComputedStyle(node).color"))
                for other in states.keys() - {status}:
                    expect(answer.get_by_text(_exactly(LABELS[other]))).to_have_count(0)
            assert len(colours) == 3, colours
            expect(supported.get_by_text("Ohio law governs")).to_be_visible()
            expect(partly.get_by_text(MISSING)).to_be_visible()

            # Not supported: the quote is the answer, the model's text is set apart and folded.
            shown = unsupported.get_by_text(
                '"Disputes go to the courts of Ohio." (quoted from p. 3)'
            )
            expect(shown).to_be_visible()
            expect(unsupported.get_by_text(MODEL_TEXT)).not_to_be_visible()
            apart = unsupported.get_by_text(MODEL_TEXT_TITLE)
            assert shown.bounding_box()["y"] < apart.bounding_box()["y"]
            apart.click()
            expect(unsupported.get_by_text(MODEL_TEXT)).to_be_visible()
            for other in (supported, partly):
                expect(other.get_by_text(MODEL_TEXT_TITLE)).to_have_count(0)
            page.screenshot(path=SHOTS / "support-states.png", full_page=True)
        except Exception:
            page.screenshot(path=SHOTS / "support-states-failed.png", full_page=True)
            raise
        finally:
            browser.close()
