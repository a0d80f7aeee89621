"""Against a running UI process: no upload is taken before sign-in, and wrong passwords lock a
client out with a sentence (issue 15, item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.live_ui import Browser, UIProcess
from ui.auth import hash_password

pytest.importorskip("websockets", reason="the live UI tests speak Streamlit's websocket")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
PASSWORD = "correct horse battery"


@pytest.fixture
def ui(tmp_path: Path):
    process = UIProcess(tmp_path, LONGDOC_UI_PASSWORD_HASH=hash_password(PASSWORD, iterations=1000))
    yield process
    process.stop()


def test_no_upload_is_taken_before_sign_in(ui: UIProcess) -> None:
    browser = Browser(ui)
    try:
        assert "LongDoc" in browser.run()  # the sign-in form, and nothing else
        pdf = b"%PDF-1.7\n" + b"0" * 2_000_000

        before = browser.upload(pdf)
        assert "That user name or password is not right." in browser.sign_in("wrong")
        still = browser.upload(pdf)
        browser.sign_in(PASSWORD)
        after = browser.upload(pdf)
    finally:
        browser.close()

    assert (before, still) == (403, 403)
    assert after == 204  # the same request, once signed in, is Streamlit's to take


def test_wrong_passwords_lock_the_client_out_with_a_sentence(ui: UIProcess) -> None:
    first, second = Browser(ui), Browser(ui)  # two sessions of one client (one address)
    try:
        answers = [first.sign_in("guess") for _ in range(5)]
        locked = second.sign_in(PASSWORD)  # even the right password, from this client
    finally:
        first.close()
        second.close()

    assert all("That user name or password is not right." in texts for texts in answers)
    (sentence,) = [t for t in locked if "Too many wrong passwords" in t]
    assert "sign-in is locked for 15 more minutes" in sentence
