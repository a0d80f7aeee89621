"""Which browser sessions of this UI process have signed in, and which of them may upload:
shared by the pages and the upload gate (ui/upload_gate.py), which runs outside any session.

Session ids are Streamlit's; a session that ends leaves its id here until the process stops
(a few dozen bytes a sign-in), where it can do no harm: ids are random and never reused.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_sessions: dict[str, bool] = {}  # session id -> may upload


def add(session_id: str, *, may_upload: bool = False) -> None:
    with _lock:
        _sessions[session_id] = may_upload


def contains(session_id: str) -> bool:
    with _lock:
        return session_id in _sessions


def may_upload(session_id: str) -> bool:
    """Signed in as a user whose role may upload (app.services.access.can)."""
    with _lock:
        return _sessions.get(session_id, False)


def remove(session_id: str) -> None:
    with _lock:
        _sessions.pop(session_id, None)
