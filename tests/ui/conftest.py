"""The UI under streamlit.testing.v1.AppTest, on a real migrated SQLite database in tmp and the
real embedded broker (kombu's filesystem transport in the data folder). No worker runs: tests
check that the job row exists and that its message reached the broker."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kombu import Connection
from sqlalchemy.orm import Session, sessionmaker

from app.db.session import make_engine
from app.migrate import upgrade
from app.services import dispatch
from app.settings import Settings, get_settings

pytest.importorskip("streamlit", reason="the UI tests need streamlit (pip install streamlit)")
from streamlit.testing.v1 import AppTest

MAIN_SCRIPT = Path(__file__).resolve().parents[2] / "ui" / "main.py"
RUN_TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def fresh_sign_in_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no wrong passwords on record (the limiter is process-wide)."""
    from ui import sign_in_limits

    monkeypatch.setattr(sign_in_limits, "limiter", sign_in_limits.SignInLimiter())


@pytest.fixture
def ui_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """LONGDOC_* for this test only, a migrated database, and settings read afresh."""
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no .env from the checkout
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_DATABASE_URL", f"sqlite:///{tmp_path / 'longdoc.db'}")
    get_settings.cache_clear()
    settings = get_settings()
    upgrade(settings.database_url)
    yield settings
    get_settings.cache_clear()
    import streamlit as st

    st.cache_resource.clear()  # the UI's database engine for this test's file
    st.cache_data.clear()


@pytest.fixture
def sessions(ui_settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(ui_settings.database_url)
    yield sessionmaker(bind=engine, expire_on_commit=False)
    engine.dispose()


@pytest.fixture
def app_test(ui_settings: Settings) -> Callable[[], AppTest]:
    def make() -> AppTest:
        return AppTest.from_file(str(MAIN_SCRIPT), default_timeout=RUN_TIMEOUT_S)

    return make


def open_page(at: AppTest, page: str, **query: str) -> AppTest:
    """Run the shell once, then the page (e.g. "views/upload.py") with query parameters."""
    at.run()
    at.query_params.update(query)
    return at.switch_page(page).run()


def broker_messages(settings: Settings, queue: str) -> list[dict]:
    """Every message waiting on `queue`, taken off it (task name, id and args)."""
    taken = []
    with Connection(
        dispatch.broker_url(settings), transport_options=dispatch.transport_options(settings)
    ) as connection:
        simple = connection.SimpleQueue(queue, no_ack=False)
        while True:
            try:
                message = simple.get(timeout=0.2)
            except simple.Empty:
                break
            message.ack()
            body = message.body if isinstance(message.body, list) else json.loads(message.body)
            taken.append(
                {"task": message.headers["task"], "id": message.headers["id"], "args": body[0]}
            )
        simple.close()
    return taken


def texts(at: AppTest, element: str) -> list[str]:
    return [str(item.value) for item in getattr(at, element)]


def all_text(at: AppTest) -> str:
    """Every markdown, caption, alert and title of the current page, joined."""
    parts = []
    for element in ("title", "markdown", "caption", "info", "warning", "error", "success"):
        parts.extend(texts(at, element))
    return "\n".join(parts)
