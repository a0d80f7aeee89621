"""No upload before sign-in: an ASGI middleware in front of Streamlit's upload endpoint.

Streamlit's PUT /_stcore/upload_file/<session id>/<file id> takes a file into the UI process's
memory for any open session, widget or not, before our script ever runs: a visitor who never
signed in could fill the memory (issue 15: 10 x 30 MB took the process from 104 to 412 MB). With
a UI password set, the gate answers 403 to an upload from a session that has not signed in, or
whose user may not upload, before reading its body. Without a password the UI is open and so are uploads.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ui import signed_in

logger = logging.getLogger("longdoc.ui.upload_gate")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
UPLOAD_PATH = "/_stcore/upload_file/"
_REFUSAL = b"Sign in first: LongDoc takes uploads only from a signed-in session."


def upload_session_id(path: str) -> str | None:
    """The session id of an upload request's path; None for any other path."""
    _, marker, rest = path.partition(UPLOAD_PATH)
    return rest.split("/", 1)[0] if marker else None


def may_upload(session_id: str) -> bool:
    # Accounts (issue 25): every session that may see a page is registered, an open UI's too,
    # with whether its user may upload (ui/auth.py require_login): a viewer's files are refused
    # here, before their bytes are read, as the page offers them no upload form.
    return signed_in.may_upload(session_id)


class UploadGate:
    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("PUT", "POST"):
            session_id = upload_session_id(scope.get("path", ""))
            if session_id is not None and not may_upload(session_id):
                logger.info("upload refused: session not signed in")
                await _refuse(send)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(_REFUSAL)).encode()),
                (b"connection", b"close"),  # the body it may still send is not read
            ],
        }
    )
    await send({"type": "http.response.body", "body": _REFUSAL})
