"""Which browser sessions of this UI process have signed in: shared by the pages and the
upload gate (ui/upload_gate.py), which runs outside any session.

Session ids are Streamlit's; a session that ends leaves its id here until the process stops
(a few dozen bytes a sign-in), where it can do no harm: ids are random and never reused.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_sessions: set[str] = set()


def add(session_id: str) -> None:
    with _lock:
        _sessions.add(session_id)


def contains(session_id: str) -> bool:
    with _lock:
        return session_id in _sessions


def remove(session_id: str) -> None:
    with _lock:
        _sessions.discard(session_id)
