"""Streamlit's [auth] secrets from the LONGDOC_OIDC_* settings (ui/oidc_secrets.py), and the
command line that hands them to Streamlit (ui/launch.py)."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from app.settings import Settings
from ui import launch, oidc_secrets


@pytest.fixture(autouse=True)
def no_outside_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no .env from the checkout


def _settings(tmp_path: Path, **oidc: str) -> Settings:
    return Settings(data_dir=tmp_path / "data", **oidc)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_secrets_file_holds_the_auth_section_for_this_user_alone(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        oidc_issuer_url="https://login.firm.test/realms/law/",
        oidc_client_id="longdoc",
        oidc_client_secret='a "quoted" secret\\',
        oidc_redirect_uri="https://longdoc.firm.test/oauth2callback",
    )
    path = oidc_secrets.write_secrets(settings)
    assert path == tmp_path / "data" / "ui" / "secrets.toml" and _mode(path) == 0o600
    auth = tomllib.loads(path.read_text())["auth"]
    cookie_file = tmp_path / "data" / "ui" / "cookie_secret"
    assert _mode(cookie_file) == 0o600 and len(auth["cookie_secret"]) >= 48
    assert auth == {
        "redirect_uri": "https://longdoc.firm.test/oauth2callback",
        "cookie_secret": cookie_file.read_text().strip(),
        "client_id": "longdoc",
        "client_secret": 'a "quoted" secret\\',
        "server_metadata_url": (
            "https://login.firm.test/realms/law/.well-known/openid-configuration"
        ),
    }
    # A restart keeps the cookie secret (nobody is signed out), and a file made readable by
    # others is written private again.
    path.chmod(0o644)
    again = oidc_secrets.write_secrets(settings)
    assert again is not None and _mode(again) == 0o600
    assert tomllib.loads(again.read_text())["auth"]["cookie_secret"] == auth["cookie_secret"]
    # OIDC turned off: the file goes.
    assert oidc_secrets.write_secrets(_settings(tmp_path)) is None and not path.exists()


def test_streamlit_reads_the_file_after_its_usual_secrets(tmp_path: Path) -> None:
    plain = launch.streamlit_argv(port=8501, address="127.0.0.1", max_upload_bytes=1)
    assert not [arg for arg in plain if arg.startswith("--secrets.files")]
    secrets_file = tmp_path / "secrets.toml"
    argv = launch.streamlit_argv(
        port=8501, address="127.0.0.1", max_upload_bytes=1, secrets_file=secrets_file
    )
    files = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--secrets.files=")]
    assert files[-1] == str(secrets_file)
    assert any(name.endswith(".streamlit/secrets.toml") for name in files[:-1])
