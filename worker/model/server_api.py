"""The OpenAI-compatible API as LongDoc's client meets it: the server's settings, its faults as
sentences (ModelServerError), the wire (status codes, server-sent events) and what the server
says of itself (/v1/models, for the client and for `longdoc health`). The client that sends
the jobs' requests is worker/model/openai_client.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

# The error text of a server that refuses response_format (400/422; 500 from an old llama.cpp).
_FORMAT_WORDS = ("response_format", "json_schema", "guided", "structured")
_CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length", "context_window")
# The error text of a server refusing a prompt past its context: OpenAI's code (vLLM,
# llama-cpp-python's server), llama.cpp's llama-server's error type and words.
_CONTEXT_WORDS = (
    "context_length_exceeded", "exceed_context_size", "maximum context length",
    "exceeds the available context",
)  # fmt: skip


class ModelServerError(Exception):
    """A fault of the model server, as a stable code and a sentence for people."""

    def __init__(self, code: str, sentence: str) -> None:
        super().__init__(sentence)
        self.code = code
        self.sentence = sentence


@dataclass(frozen=True)
class ServerConfig:
    base_url: str
    model: str = ""
    api_key: str | None = None
    context_tokens: int = 8192
    concurrency: int = 8
    timeout_s: float = 600.0
    max_retries: int = 4
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    structured_output: str = "auto"  # worker/model/structured_output.py's MODES

    @classmethod
    def from_settings(cls, settings: Any) -> ServerConfig:
        return cls(
            base_url=settings.llm_base_url.rstrip("/"),
            model=settings.llm_model,
            api_key=settings.llm_key(),
            context_tokens=settings.llm_context_tokens,
            concurrency=settings.llm_concurrency,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            backoff_s=settings.llm_backoff_s,
            backoff_max_s=settings.llm_backoff_max_s,
            structured_output=settings.llm_structured_output,
        )

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc or self.base_url

    def __repr__(self) -> str:  # never the key
        return f"ServerConfig(base_url={self.base_url!r}, model={self.model!r})"


class Busy(Exception):
    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(status)
        self.status, self.retry_after = status, retry_after


class Malformed(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class SchemaRefused(Exception):
    pass


class StreamCut(Exception):
    """A stream the server ended ("data: [DONE]") before its finish_reason: llama-cpp-python's
    server does so to a stream when another request comes (its `interrupt_requests`, on by
    default), and serves one request at a time."""


# What `events` yields at a stream's "data: [DONE]" (compared by identity).
STREAM_DONE: dict[str, Any] = {}


def raise_for_status(response: httpx.Response, config: ServerConfig, *, schema: bool) -> None:
    status = response.status_code
    if status in (401, 403):
        raise ModelServerError(
            "model_server_key",
            f"The model server at {config.host} refused the API key (HTTP {status}): set "
            "LONGDOC_LLM_API_KEY (or LONGDOC_LLM_API_KEY_FILE) to a key it accepts.",
        )
    if status == 400 and any(word in response.text.lower() for word in _CONTEXT_WORDS):
        raise ModelServerError(
            "model_server_context",
            f"The model server at {config.host} refused a prompt longer than its context "
            "length (HTTP 400): set LONGDOC_LLM_CONTEXT_TOKENS to at most the server's context "
            "(llama.cpp's -c or --n_ctx).",
        )
    # llama.cpp servers from before type json_schema refuse it with a 500, not a 400: a
    # refusal that names the format is no busy server.
    if schema and status in (400, 422, 500):
        words = response.text.lower()
        if any(word in words for word in _FORMAT_WORDS):
            raise SchemaRefused()
    if status == 429 or status >= 500:
        raise Busy(status, retry_after(response))
    if status == 404:
        raise ModelServerError(
            "model_server_no_model",
            f"The model server at {config.host} has no chat completions for the model "
            f"{config.model or '(its first)'} (HTTP 404): check LONGDOC_LLM_BASE_URL (it ends "
            "in /v1) and LONGDOC_LLM_MODEL.",
        )
    raise ModelServerError(
        "model_server_refused",
        f"The model server at {config.host} refused the request (HTTP {status}).",
    )


def retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def events(response: httpx.Response):
    """The JSON objects of a server-sent event stream (or of a plain JSON reply, which some
    servers send whatever `stream` says), then STREAM_DONE where the stream says "[DONE]"."""
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" not in content_type:
        response.read()
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise Malformed("reply that is not JSON") from None
        if not isinstance(data, dict):
            raise Malformed("reply that is not a completion")
        yield data
        return
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            yield STREAM_DONE
            return
        try:
            data = json.loads(payload)
        except json.JSONDecodeError:
            raise Malformed("reply that is not JSON") from None
        if not isinstance(data, dict):
            raise Malformed("reply that is not a completion")
        yield data


def context_length(entry: dict[str, Any]) -> int | None:
    """The context length a /v1/models entry gives: vLLM's `max_model_len` (and the names
    other servers use), or llama.cpp's `meta.n_ctx` (a slot's context, what one request may
    use; not `n_ctx_train`, the model's, which the server may not have room for). None
    where it gives none (llama-cpp-python's server, Ollama)."""
    meta = entry.get("meta")
    candidates = [entry.get(key) for key in _CONTEXT_KEYS]
    if isinstance(meta, dict):
        candidates.append(meta.get("n_ctx"))
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def list_models(http: httpx.Client, config: ServerConfig) -> list[dict[str, Any]]:
    """The server's `GET /models` entries, or a ModelServerError with its sentence."""
    try:
        response = http.get(f"{config.base_url}/models", timeout=min(30.0, config.timeout_s))
    except httpx.ConnectError:
        raise ModelServerError(
            "model_server_down",
            f"The model server at {config.host} did not answer; the job can be run again once "
            "it is up.",
        ) from None
    except httpx.TimeoutException:
        raise ModelServerError(
            "model_server_timeout", f"The model server at {config.host} did not answer in time."
        ) from None
    except httpx.HTTPError as error:
        raise ModelServerError(
            "model_server_down",
            f"The model server at {config.host} could not be reached ({type(error).__name__}).",
        ) from None
    if response.status_code != 200:
        try:
            raise_for_status(response, config, schema=False)
        except Busy as busy:
            raise ModelServerError(
                "model_server_busy",
                f"The model server at {config.host} is busy (HTTP {busy.status}).",
            ) from None
    try:
        data = response.json().get("data")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        data = None
    if not isinstance(data, list):
        raise ModelServerError(
            "model_server_bad_reply",
            f"The model server at {config.host} answered /models with something that is not "
            "a model list; check that LONGDOC_LLM_BASE_URL ends in /v1.",
        )
    return [entry for entry in data if isinstance(entry, dict)]


def check_server(config: ServerConfig) -> tuple[bool, str]:
    """For `longdoc health`: does the server answer, and does it serve the configured model."""
    with httpx.Client(
        headers={"Authorization": f"Bearer {config.api_key}"} if config.api_key else {},
        timeout=httpx.Timeout(10.0),
    ) as http:
        try:
            listed = list_models(http, config)
        except ModelServerError as error:
            return False, error.sentence
    names = [str(entry.get("id")) for entry in listed]
    if not names:
        return False, f"The model server at {config.host} lists no model."
    if config.model and config.model not in names:
        return False, (
            f"The model server at {config.host} does not serve {config.model!r}; it serves: "
            f"{', '.join(names[:5])}."
        )
    model = config.model or names[0]
    entry = next(e for e in listed if str(e.get("id")) == model)
    length = context_length(entry)
    context = (
        f"{length} tokens of context"
        if length
        else f"context length not given: LONGDOC_LLM_CONTEXT_TOKENS, {config.context_tokens}, "
        "is used; it must not exceed the server's"
    )
    return True, f"The model server at {config.host} serves {model} ({context})."
