"""A tiny OpenAI-compatible HTTP server (stdlib http.server in a thread) that answers from a
script: for the faults a real server cannot be made to produce on demand (401, 429, garbage,
a reply cut by the length limit)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before the reply: a server that does not answer in time


def chunks(text: str, finish_reason: str = "stop", usage: dict | None = None) -> Reply:
    """A streamed completion: one event per word, then the finish, then the usage."""
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    words = text.split(" ")
    for index, word in enumerate(words):
        piece = word if index == 0 else " " + word
        events.append({"choices": [{"index": 0, "delta": {"content": piece}}]})
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]})
    if usage is not None:
        events.append({"choices": [], "usage": usage})
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Reply(body=body.encode())


def error(status: int, message: str = "no", **headers: str) -> Reply:
    body = json.dumps({"error": {"message": message}}).encode()
    return Reply(status=status, body=body, content_type="application/json", headers=headers)


class Stub:
    """Replies to POST /v1/chat/completions from `replies` in order (the last one repeats);
    GET /v1/models lists `models`. `requests` keeps each POST's headers and JSON body."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.models: list[dict] = [{"id": "stub-model", "object": "model", "max_model_len": 4096}]
        self.requests: list[tuple[dict[str, str], dict]] = []
        self.lock = threading.Lock()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def next_reply(self) -> Reply:
        with self.lock:
            return self.replies.popleft() if len(self.replies) > 1 else self.replies[0]


@contextmanager
def stub_server() -> Iterator[Stub]:
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, reply: Reply) -> None:
            time.sleep(reply.delay_s)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                body = json.dumps({"object": "list", "data": stub.models}).encode()
                self._send(Reply(body=body, content_type="application/json"))
            else:
                self._send(error(404))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            with stub.lock:
                stub.requests.append((dict(self.headers), body))
            self._send(stub.next_reply())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    stub.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
