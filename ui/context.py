"""What every page needs: the settings, database sessions, and a way to show an AppError.

The database engine is cached per URL for the life of the Streamlit server (one pool for all
browser sessions). Pages open a short session per read or write and never hold one across reruns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app import metrics_export
from app.db.session import database_unavailable, make_engine, sqlite_file
from app.display import display_name
from app.errors import AppError, DatabaseNotMigrated
from app.migrate import require_head
from app.services.access import AccessRefused, Actor
from app.settings import Settings, load_settings

DOCUMENT_PAGE = "views/document.py"
UPLOAD_PAGE = "views/upload.py"
LIBRARY_PAGE = "views/library.py"
MONITORING_PAGE = "views/monitoring.py"
SEARCH_PAGE = "views/search.py"
COLLECTIONS_PAGE = "views/collections.py"
AUDIT_PAGE = "views/audit.py"


def settings() -> Settings:
    return load_settings()


def actor() -> Actor:
    """The signed-in user of this browser session (ui/auth.py put it there this run)."""
    found = st.session_state.get("actor")
    if found is None:  # a page run without the shell: nobody
        raise AccessRefused("Sign in first.")
    return found


def serve_metrics(settings: Settings) -> None:
    """This Streamlit server's Prometheus metrics on LONGDOC_METRICS_PORT, started once."""
    if settings.metrics_port is not None:
        _metrics_exporter(settings.metrics_port)


@st.cache_resource(show_spinner=False)
def _metrics_exporter(port: int) -> int | None:
    return metrics_export.start_exporter(settings(), port=port)


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    return make_engine(url)


def _checked_engine(url: str) -> Engine:
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise DatabaseNotMigrated(
            f"There is no database at {path} yet; run `longdoc db upgrade` to create it."
        )
    engine = _engine(url)
    if not st.session_state.get(f"_checked:{url}"):
        require_head(engine)
        st.session_state[f"_checked:{url}"] = True
    return engine


@contextmanager
def session() -> Iterator[Session]:
    """A session on the migrated database; loaded values stay readable after commit."""
    url = settings().database_url
    try:
        engine = _checked_engine(url)
        with sessionmaker(bind=engine, expire_on_commit=False)() as db:
            yield db
    except (OperationalError, InterfaceError) as error:
        raise database_unavailable(url, error) from error


def show_error(error: AppError) -> None:
    st.error(str(error), icon=":material/error:")


def document_link(document_id: int, label: str, *, icon: str = ":material/description:") -> None:
    st.page_link(DOCUMENT_PAGE, label=label, icon=icon, query_params={"doc": str(document_id)})


def human_bytes(num_bytes: float | None) -> str:
    if num_bytes is None:
        return "—"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(num_bytes) < 1024 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    return f"{num_bytes:.1f} GB"


_MARKDOWN_SPECIALS = "\\`*_{}[]()#+-.!|<>~$:"


def md_escape(text: str) -> str:
    """User-given text (file names, titles) shown through Markdown as it is written, without
    control or bidi characters (app/display.py)."""
    text = display_name(text)
    return "".join(f"\\{char}" if char in _MARKDOWN_SPECIALS else char for char in text)
