"""Per-process resources of the tasks: settings, database sessions, tokenizer, and the
sentence-embedding model.

Built on first use in the process that runs tasks; `reset()` runs in every new pool child so a
database connection pool opened by the parent before the fork is never shared.
"""

from __future__ import annotations

import threading

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.db.session import make_engine
from app.settings import Settings, get_settings
from worker.model.embedder import SharedEmbedder, TransformerEmbedder
from worker.model.source import resolve_model_path
from worker.model.tokens import TokenizerCounter, token_counter_for

_lock = threading.Lock()
_engine: Engine | None = None
_sessions: sessionmaker[Session] | None = None
_counter: TokenizerCounter | None = None
_embedders = SharedEmbedder()


def settings() -> Settings:
    return get_settings()


def sessions() -> sessionmaker[Session]:
    global _engine, _sessions
    with _lock:
        if _sessions is None:
            _engine = make_engine(settings().database_url)
            # Rows are read after commit (progress, outcomes): keep their loaded values.
            _sessions = sessionmaker(bind=_engine, expire_on_commit=False)
        return _sessions


def count_tokens() -> TokenizerCounter:
    global _counter
    with _lock:
        if _counter is None:
            current = settings()
            _counter = token_counter_for(resolve_model_path(current.model), current.model_cache_dir)
        return _counter


def embedder() -> TransformerEmbedder | None:
    """The embedding model of the `embedding_model` setting, loaded once per process; None when
    it is "none" or cannot be loaded (retrieval is then BM25 alone; the reason is logged)."""
    return _embedders.get(settings().embedding_model)


def reset() -> None:
    """Drop what a parent process may have opened before forking this one."""
    global _engine, _sessions, _counter
    with _lock:
        if _engine is not None:
            # close=False: the parent's connections belong to the parent; only forget them.
            _engine.dispose(close=False)
        _engine, _sessions, _counter = None, None, None
    # A model loaded before a fork would share torch's thread pools with the child.
    _embedders.reset()
