"""Streamlit's `[auth]` secrets, written from the LONGDOC_OIDC_* settings when the UI starts.

Streamlit's st.login reads its provider from secrets.toml only. `python -m ui.launch` (and so
`longdoc up --ui`) writes <data_dir>/ui/secrets.toml, readable by this user alone, and hands it
to Streamlit after its usual secrets files (`--secrets.files`), so an operator's own
.streamlit/secrets.toml keeps working and the settings stay the one place to configure. With
OIDC off the file is removed. The cookie secret, which signs Streamlit's identity cookie, is
made once and kept in <data_dir>/ui/cookie_secret, so a restart does not sign everyone out.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from app.settings import Settings

SECRETS_FILE = "secrets.toml"
COOKIE_SECRET_FILE = "cookie_secret"
PRIVATE = 0o600


def folder(settings: Settings) -> Path:
    return settings.data_dir / "ui"


def auth_section(settings: Settings, *, cookie_secret: str) -> dict[str, str]:
    """Streamlit's [auth] for the default provider (st.login() with no name)."""
    return {
        "redirect_uri": settings.oidc_redirect_uri,
        "cookie_secret": cookie_secret,
        "client_id": settings.oidc_client_id,
        "client_secret": settings.oidc_secret(),
        "server_metadata_url": settings.oidc_server_metadata_url,
    }


def render(section: dict[str, str]) -> str:
    # A JSON string is a TOML basic string (the same escapes).
    lines = [
        "# Written by LongDoc (ui/oidc_secrets.py) at each start; edit LONGDOC_OIDC_*.",
        "[auth]",
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in section.items()]
    return "\n".join(lines) + "\n"


def cookie_secret(settings: Settings) -> str:
    """The kept cookie secret, made on first use."""
    path = folder(settings) / COOKIE_SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    made = secrets.token_urlsafe(48)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(made + "\n")
    return made


def write_secrets(settings: Settings) -> Path | None:
    """The secrets file for Streamlit, written afresh; None (and no file) with OIDC off."""
    path = folder(settings) / SECRETS_FILE
    if not settings.is_oidc_enabled:
        path.unlink(missing_ok=True)
        return None
    section = auth_section(settings, cookie_secret=cookie_secret(settings))
    _write_private(path, render(section))
    return path


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a file only this user may read, replacing any there at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temporary, PRIVATE)  # an existing file keeps its mode through O_CREAT
    os.replace(temporary, path)
