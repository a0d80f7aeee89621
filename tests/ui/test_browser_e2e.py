"""End to end in a real browser: Debian's chromium driven by Playwright against the stack that
`make run` starts (`longdoc up`: worker and beat on the embedded broker; `python -m ui.launch`).

Upload a PDF, wait for its summary, ask a question, see a citation and open it; put the
document into a new collection, ask the collection, see the answer's quotes and its citation
"Office Lease Agreement, p. N", and open it. Screenshots go to test-output/ui-e2e/ at the
repository root (ignored by git).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.migrate import upgrade
from tests.pipelines import pdf_factory
from tests.worker import celery_support

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-output" / "ui-e2e"
LONGDOC = str(Path(sys.executable).parent / "longdoc")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
START_TIMEOUT_S = 120
SUMMARY_TIMEOUT_MS = 300_000
ANSWER_TIMEOUT_MS = 300_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="the browser test needs Debian's chromium at /usr/bin/chromium "
        "(apt-get install chromium); Playwright's own browser download is not used",
    ),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Service:
    """A child process in its own process group, its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            argv, env=env, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, needle: str, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not say {needle!r}:\n{self.log()[-3000:]}")
            time.sleep(0.3)

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 40.0) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, sig)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()


@pytest.fixture
def stack(tmp_path: Path, converted_model_cache: Path) -> Iterator[str]:
    """`longdoc up` and the UI on a fresh data folder; yields the UI's address."""
    port = free_port()
    env = celery_support.worker_env(
        tmp_path,
        converted_model_cache,
        database_url=f"sqlite:///{tmp_path / 'data' / 'longdoc.db'}",
        LONGDOC_SUMMARY_MAX_NEW_TOKENS="48",
        LONGDOC_ANSWER_MAX_NEW_TOKENS="48",
        LONGDOC_UI_PORT=str(port),
    )
    upgrade(env["LONGDOC_DATABASE_URL"])  # what `make run` does first (`longdoc db upgrade`)
    services = [
        Service("up", [LONGDOC, "up"], env, tmp_path),
        Service("ui", [sys.executable, "-m", "ui.launch"], env, tmp_path),
    ]
    try:
        services[0].wait_for_log(" ready.")  # the worker's line, printed through `up`
        services[1].wait_for_log(f"http://localhost:{port}")
        address = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            health = f"{address}/_stcore/health"
            with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=2) as reply:
                if reply.read() == b"ok":
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"the UI never became healthy:\n{services[1].log()[-3000:]}")
            time.sleep(0.3)
        yield address
    finally:
        services[1].stop(signal.SIGTERM)
        services[0].stop(signal.SIGINT)
        SHOTS.mkdir(parents=True, exist_ok=True)
        for service in services:
            (SHOTS / f"{service.name}.log").write_text(service.log())


def test_upload_summarize_ask_and_open_a_citation_in_chromium(stack: str, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    SHOTS.mkdir(parents=True, exist_ok=True)
    pdf = pdf_factory.text_pdf(
        tmp_path,
        [
            "Office Lease Agreement\nAcme Properties leases Suite 400 to Beta Clinics.\n"
            "The tenant pays 900 dollars rent each month.\nRent is due on the first day.",
            "Termination\nEither party may end this lease with three months written notice.\n"
            "The deposit of 1800 dollars is returned within thirty days.",
        ],
        name="office-lease.pdf",
        title="Office Lease Agreement",
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(180_000)  # a hang, not a busy machine (CI: 2 shared cores)
        try:
            ask_the_document(page, stack, pdf)
            ask_the_collection(page, sync_api.expect)
            look_around(page)
        except Exception:
            page.screenshot(path=SHOTS / "failed.png", full_page=True)
            raise
        finally:
            browser.close()
    for log in ("up.log", "ui.log"):  # ids and counts only, never the document or the question
        text = (tmp_path / log).read_text(errors="replace")
        assert "900 dollars rent" not in text and "How much rent" not in text, log
        assert "When is the rent due" not in text, log


def ask_the_collection(page, expect) -> None:
    """A new collection, the uploaded document added to it, a question asked of it."""
    page.get_by_role("link", name="Collections").first.click()
    page.get_by_text("Choose a collection, or create one.").wait_for()
    page.get_by_role("button", name="New collection").click()
    page.get_by_label("Name", exact=True).fill("Matter 7")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_label("Collection", exact=True)).to_have_value("Matter 7")
    page.keyboard.press("Escape")  # harmless: Create closes the popover itself
    wait_for_the_script(page)
    page.get_by_text("Documents (0)").click()
    pick(page, "Add documents", "Office Lease Agreement")
    page.get_by_role("button", name="Add", exact=True).click()
    page.get_by_text("Documents (1)").wait_for()
    wait_for_the_script(page)
    page.get_by_label("Ask the collection").fill("When is the rent due?")
    page.get_by_role("button", name="Ask", exact=True).click()
    asked = page.get_by_text("When is the rent due?")
    page.get_by_text("Answer job").or_(asked).first.wait_for()
    page.screenshot(path=SHOTS / "08-collection-question-waiting.png", full_page=True)
    asked.first.wait_for(timeout=ANSWER_TIMEOUT_MS)
    page.get_by_text("Quoted from the documents").filter(visible=True).first.wait_for()
    expect(page.get_by_text(re.compile(r"^“.+”$")).first).to_be_visible()  # a quote
    page.get_by_text("Cited, click to read").first.wait_for()
    # Each quote's page and each cited page is a button naming the document and the page.
    cited = page.get_by_role("button", name=re.compile(r"Office Lease Agreement, p\. \d+$"))
    assert cited.filter(visible=True).count() >= 2, "a quote's button and a citation's"
    cited = cited.filter(visible=True)
    page.screenshot(path=SHOTS / "09-collection-answer.png", full_page=True)
    cited.first.click()  # the first quote's page: its sentence is marked there
    page.get_by_role("dialog").locator("mark").first.wait_for()
    page.screenshot(path=SHOTS / "09b-collection-cited-page.png")
    page.keyboard.press("Escape")


def wait_for_the_script(page) -> None:
    """Until Streamlit's script run is over: an element the run has not sent yet is replaced
    when it arrives, closing a list opened on it before (seen after Create, within ~1 s)."""
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()


def pick(page, label: str, option: str, attempts: int = 5) -> None:
    """Open a multiselect by its label and choose an option, then look that it took (a chip
    naming it), as a person would: a list closed by a late rerun is opened again, and a choice
    made on an element a rerun then replaced (the picker shows empty) is made again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    picker = page.get_by_label(label)
    # The widget, not its list (drawn elsewhere in the page): its chips name what is chosen.
    chosen = page.get_by_test_id("stMultiSelect").filter(has_text=option)
    for _ in range(attempts - 1):
        if chosen.count():
            return
        picker.click()
        with contextlib.suppress(PlaywrightTimeout):
            page.get_by_role("option").filter(has_text=option).first.click(timeout=3_000)
            page.keyboard.press("Escape")  # the list
            wait_for_the_script(page)
            chosen.first.wait_for(timeout=3_000)
            return
        page.keyboard.press("Escape")
        wait_for_the_script(page)
    if not chosen.count():
        picker.click()
        page.get_by_role("option").filter(has_text=option).first.click()
        page.keyboard.press("Escape")
    chosen.first.wait_for()


def ask_the_document(page, stack: str, pdf: Path) -> None:
    """Upload, the summary, a question asked, its citation opened."""
    page.goto(stack)
    page.get_by_text("No documents yet").wait_for()
    page.get_by_role("link", name="Upload PDFs").wait_for()
    page.get_by_text("Workers").first.wait_for()
    page.screenshot(path=SHOTS / "01-library-empty.png", full_page=True)

    page.get_by_role("link", name="Upload").first.click()
    page.locator('input[type="file"]').set_input_files(str(pdf))
    page.get_by_text("office-lease.pdf").first.wait_for()
    page.get_by_role("button", name="Add to library").click()
    page.get_by_text("office-lease.pdf").first.wait_for()
    page.get_by_text("Ingest job").first.wait_for()
    page.screenshot(path=SHOTS / "02-upload-progress.png", full_page=True)
    page.get_by_text("Summary job").first.wait_for(timeout=SUMMARY_TIMEOUT_MS)
    page.get_by_text("· Done").nth(1).wait_for(timeout=SUMMARY_TIMEOUT_MS)
    page.screenshot(path=SHOTS / "03-upload-done.png", full_page=True)

    page.get_by_role("link", name="Open the document").first.click()
    page.get_by_text("One pass").or_(page.get_by_text("Hierarchical")).first.wait_for()
    page.get_by_role("button", name="Summarize again").wait_for()
    page.get_by_text("Key passages").first.wait_for()  # quoted, before the model's summary
    page.screenshot(path=SHOTS / "04-document-summary.png", full_page=True)

    page.get_by_role("tab").filter(has_text="Questions").click()
    question = page.get_by_placeholder("Ask a question about this document")
    question.fill("How much rent does the tenant pay each month?")
    question.press("Enter")
    page.get_by_text("How much rent does the tenant pay each month?").first.wait_for()
    page.screenshot(path=SHOTS / "05-question-waiting.png", full_page=True)
    # Visible ones only: the Summary tab's key passages have page buttons too.
    citation = page.get_by_role("button", name="p. ").filter(visible=True).first
    citation.wait_for(timeout=ANSWER_TIMEOUT_MS)
    # The answer's quotes; visible ones only: the Summary tab's hidden caption "From the key
    # facts, each quoted from the document" matches this text too.
    page.get_by_text("Quoted from the document").filter(visible=True).first.wait_for()
    page.screenshot(path=SHOTS / "06-answer-with-citation.png", full_page=True)

    citation.click()
    page.locator("mark").first.wait_for()
    page.screenshot(path=SHOTS / "07-cited-page.png")
    page.keyboard.press("Escape")


def look_around(page) -> None:
    """The library, a search of the passages and the monitoring page."""
    page.get_by_role("link", name="Library").first.click()
    page.get_by_text("1 of 1 matching document").wait_for()
    page.screenshot(path=SHOTS / "10-library.png", full_page=True)
    page.get_by_role("link", name="Search").first.click()
    words = page.get_by_label("Words to find")
    words.fill("deposit returned")
    words.press("Enter")
    page.get_by_text("1 passage, best match first.").wait_for()
    page.locator("strong").filter(has_text="deposit").first.wait_for()  # the matched words
    page.get_by_role("button", name="Read p. 2").click()  # the passage is on page 2
    page.get_by_role("dialog").locator("mark").first.wait_for()
    page.screenshot(path=SHOTS / "10b-search.png", full_page=True)
    page.keyboard.press("Escape")
    page.get_by_role("link", name="Monitoring").first.click()
    page.get_by_text("Model requests").first.wait_for()
    page.set_viewport_size({"width": 1440, "height": 2000})  # every chart in one picture
    page.wait_for_timeout(2000)  # let Vega draw
    page.screenshot(path=SHOTS / "11-monitoring.png", full_page=True)
