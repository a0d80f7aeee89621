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


def chunks(text: str, finish_reason: str | None = "stop", usage: dict | None = None) -> Reply:
    """A streamed completion: one event per word, then the finish (none for None: a stream
    cut short, as llama-cpp-python's server cuts one when another request comes), then the
    usage."""
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    words = text.split(" ")
    for index, word in enumerate(words):
        piece = word if index == 0 else " " + word
        events.append({"choices": [{"index": 0, "delta": {"content": piece}}]})
    if finish_reason is not None:
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]})
    if usage is not None:
        events.append({"choices": [], "usage": usage})
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Reply(body=body.encode())


def error(status: int, message: str = "no", **headers: str) -> Reply:
    body = json.dumps({"error": {"message": message}}).encode()
    return Reply(status=status, body=body, content_type="application/json", headers=headers)


# What each server family says of itself as /v1/models' owned_by.
OWNED_BY = {
    "vllm": "vllm", "ollama": "library", "llamacpp": "llamacpp", "llamacpp-old": "llamacpp",
    "llama-cpp-python": "me",
}  # fmt: skip


def schema_read(kind: str, body: dict) -> tuple[dict | None, Reply | None]:
    """The JSON schema a server of `kind` reads from a chat completion request's body (None:
    it reads none, and writes plain text), or the error it answers instead; after their code:
    vLLM's protocol.py (response_format type json_schema needs json_schema.schema), Ollama's
    openai/openai.go FromChatRequest (json_schema.schema becomes the native `format`; other
    types and fields are ignored), llama.cpp's server oaicompat_chat_params_parse (json_object
    takes response_format.schema or the top-level json_schema; json_schema takes
    json_schema.schema; "llamacpp-old", a server from before that, refuses type json_schema
    with a 500, as such versions did; "llama-cpp-python", its Python binding's server,
    llama_cpp/server/types.py: response_format types "text" and "json_object" only, its
    `schema` read, the top-level json_schema ignored, other types refused with a 500 whose
    message names response_format, as its error handler wraps pydantic's)."""
    response_format = body.get("response_format")
    kind_of = response_format.get("type", "") if isinstance(response_format, dict) else ""
    wrapped = (response_format or {}).get("json_schema") if kind_of == "json_schema" else None
    inner = wrapped.get("schema") if isinstance(wrapped, dict) else None
    if kind == "vllm":
        if kind_of == "json_schema" and not isinstance(inner, dict):
            return None, error(400, "response_format.json_schema.schema is required")
        if kind_of not in ("", "text", "json_schema"):
            return None, error(400, f"response_format type {kind_of} is not supported")
        return inner, None
    if kind == "ollama":
        return (inner if isinstance(inner, dict) else None), None
    if kind in ("llamacpp", "llamacpp-old"):
        if kind_of == "json_object":
            schema = response_format.get("schema") or body.get("json_schema")
            return (schema if isinstance(schema, dict) else None), None
        if kind_of == "json_schema" and kind == "llamacpp":
            return (inner if isinstance(inner, dict) else None), None
        if kind_of not in ("", "text"):
            message = (
                f'response_format type must be one of "text" or "json_object", but got: {kind_of}'
            )
            return None, error(500 if kind == "llamacpp-old" else 400, message)
        schema = body.get("json_schema")
        return (schema if isinstance(schema, dict) else None), None
    if kind == "llama-cpp-python":
        if kind_of not in ("", "text", "json_object"):
            message = (
                "1 validation error: {'type': 'literal_error', 'loc': ('body', "
                "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}"
            )
            return None, error(500, message)
        schema = response_format.get("schema") if kind_of == "json_object" else None
        return (schema if isinstance(schema, dict) else None), None
    raise ValueError(f"no such server kind: {kind}")


class Stub:
    """Replies to POST /v1/chat/completions from `replies` in order (the last one repeats);
    GET /v1/models lists `models`. `requests` keeps each POST's headers and JSON body.

    `serve_as(kind)` makes it a server of that family (OWNED_BY): it lists its model as that
    server does, reads the request's structured-output fields as that server does
    (schema_read: a body of the wrong shape is refused or its schema goes unseen), and
    answers `json_reply` to a request whose schema it read, `replies` to the others;
    `schemas_read` keeps what it read of each request."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.models: list[dict] = [{"id": "stub-model", "object": "model", "max_model_len": 4096}]
        self.requests: list[tuple[dict[str, str], dict]] = []
        self.lock = threading.Lock()
        self.port = 0
        self.kind: str | None = None
        self.json_reply: Reply | None = None
        self.schemas_read: list[dict | None] = []

    def serve_as(self, kind: str, json_reply: Reply) -> None:
        self.kind, self.json_reply = kind, json_reply
        self.models = [{"id": "stub-model", "object": "model", "owned_by": OWNED_BY[kind]}]

    def reply_to(self, body: dict) -> Reply:
        if self.kind is None:
            return self.next_reply()
        schema, refused = schema_read(self.kind, body)
        with self.lock:
            self.schemas_read.append(schema)
        if refused is not None:
            return refused
        if schema is not None and self.json_reply is not None:
            return self.json_reply
        return self.next_reply()

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
            self._send(stub.reply_to(body))

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
