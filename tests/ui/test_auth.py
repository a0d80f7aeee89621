"""The optional UI password: hashing, the sign-in gate on every page, and production's refusal
to run without one."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.settings import Settings, get_settings
from tests.ui.conftest import all_text
from ui.auth import hash_password, verify_password


def test_a_hash_verifies_its_password_only() -> None:
    encoded = hash_password("correct horse", iterations=1000)
    assert encoded.startswith("pbkdf2_sha256$1000$")
    assert verify_password("correct horse", encoded)
    assert not verify_password("correct horsE", encoded)
    assert not verify_password("correct horse", "")
    assert not verify_password("correct horse", "md5$1$x$y")
    assert not verify_password("correct horse", "pbkdf2_sha256$notanumber$x$y")
    assert hash_password("same", iterations=1000) != hash_password("same", iterations=1000)
    Settings(_env_file=None, ui_password_hash=encoded)  # the settings accept the format
    with pytest.raises(ValidationError):
        Settings(_env_file=None, ui_password_hash="plain-text-password")


def test_production_refuses_to_run_without_a_ui_password(tmp_path) -> None:
    with pytest.raises(ValidationError, match="LONGDOC_UI_PASSWORD_HASH"):
        Settings(_env_file=None, environment="production", data_dir=tmp_path)
    encoded = hash_password("pw", iterations=1000)
    settings = Settings(
        _env_file=None, environment="production", data_dir=tmp_path, ui_password_hash=encoded
    )
    assert settings.is_production
    assert not Settings(_env_file=None, data_dir=tmp_path).ui_password_hash  # open by default


@pytest.mark.parametrize("page", ["views/library.py", "views/upload.py", "views/monitoring.py"])
def test_every_page_waits_for_the_password(app_test, ui_settings, monkeypatch, page) -> None:
    monkeypatch.setenv("LONGDOC_UI_PASSWORD_HASH", hash_password("let me in", iterations=1000))
    get_settings.cache_clear()
    monkeypatch.setattr("ui.auth.FAILURE_DELAY_S", 0.0)
    at = app_test().run()
    at.switch_page(page).run()
    assert [t.value for t in at.title] == ["LongDoc"]  # only the sign-in form
    assert not at.sidebar.metric and not at.main.metric and not at.file_uploader

    at.text_input[0].set_value("admin")  # the shared password's user (accounts, issue 25)
    at.text_input[1].set_value("let me out")
    at.button[0].click().run()
    assert "That user name or password is not right." in all_text(at)
    assert [t.value for t in at.title] == ["LongDoc"]

    at.text_input[0].set_value("admin")
    at.text_input[1].set_value("let me in")
    at.button[0].click().run()
    assert not at.exception
    assert "LongDoc" not in [t.value for t in at.title]
    assert at.sidebar.metric  # the shell and the page render now
