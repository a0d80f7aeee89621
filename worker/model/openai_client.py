"""An OpenAI-compatible model server as the pipelines' ChatModel (the LONGDOC_LLM_* settings).

vLLM, SGLang, Ollama, llama.cpp's server and `transformers serve` all answer
`POST {base}/chat/completions` (the server applies its model's chat template) and
`GET {base}/models`. Every request streams (server-sent events), so a job's progress moves as
the text comes. The requests of one call go together, up to `llm_concurrency` at once over the
whole process; a question (PRIORITY_INTERACTIVE) takes the next free slot before batch work.

Token counts: the server's `usage` where it gives it; before a request, without the model's
tokenizer, a conservative estimate (a token per 3 characters: English averages about 4), so a
prompt judged to fit does fit. The context length is the server's (`max_model_len` in
/v1/models, as vLLM gives it), else the `llm_context_tokens` setting.

Structured output: `complete_many(..., response_schema=...)` asks for JSON matching a JSON
schema, in the request shape of the server's family (worker/model/structured_output.py:
OpenAI's `response_format` json_schema for vLLM, SGLang and Ollama, llama.cpp's own). A
server that refuses it is asked again in plain text, for good; a reply that does not match the
schema is asked again once (not one cut by the token limit), then its text is returned for the
caller's own parsing. A server that ignores the schema (plain text, not JSON,
SCHEMA_IGNORED_LIMIT times in a row) is asked in plain text from then on, so it does not cost
every request twice.

Faults, each a ModelServerError with a code and a sentence (worker/jobs/job_run.py stores it on
the job; the job can be run again): no connection ("the model server at HOST did not answer"),
401/403 (the key), 429 and 5xx (retried with exponential backoff and jitter, bounded), a
request past `llm_timeout_s` or the task's deadline, a malformed or empty reply. A reply cut
by the token limit keeps finish_reason "length" in its stats, as the engine's does, and is
logged as cut. Nothing here logs prompts, replies or the key: host, status and counts only.
"""

from __future__ import annotations

import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import jsonschema
from celery.exceptions import SoftTimeLimitExceeded

from app import metrics
from pipelines.protocols import ProgressCallback, TokenProgressCallback
from worker.model.adapter import PRIORITY_BATCH
from worker.model.server_api import (
    Busy,
    Malformed,
    ModelServerError,
    SchemaRefused,
    ServerConfig,
    context_length,
    events,
    list_models,
    raise_for_status,
)
from worker.model.structured_output import OFF, request_fields, resolve

logger = logging.getLogger(__name__)

# Characters per token assumed without a tokenizer: fewer than any common tokenizer's average
# on English or code, so counts err high. Each chat message adds its template's few tokens.
CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 8
_CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerCompletion:
    text: str
    stats: dict[str, Any] = field(default_factory=dict)


class _Slots:
    """At most `size` requests at once; a waiting request of higher priority goes first."""

    def __init__(self, size: int) -> None:
        self.free = size
        self._waiting: list[tuple[int, int]] = []  # (-priority, ticket)
        self._tickets = 0
        self._cond = threading.Condition()

    def acquire(self, priority: int) -> None:
        with self._cond:
            self._tickets += 1
            me = (-priority, self._tickets)
            self._waiting.append(me)
            while self.free <= 0 or min(self._waiting) != me:
                self._cond.wait()
            self._waiting.remove(me)
            self.free -= 1
            self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            self.free += 1
            self._cond.notify_all()


class _Shared:
    """What every task of a process shares for one server: the HTTP client, the slots, what was
    learnt of the server (its model, context length, whether it takes a JSON schema)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        headers = {"Accept": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self.http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(
                config.timeout_s, connect=min(_CONNECT_TIMEOUT_S, config.timeout_s)
            ),
            limits=httpx.Limits(max_connections=config.concurrency + 2),
        )
        self.slots = _Slots(config.concurrency)
        self.lock = threading.Lock()
        self.model: str | None = config.model or None
        self.context_tokens: int | None = None
        # The request shape for a JSON schema (worker/model/structured_output.py), resolved
        # from /v1/models when "auto"; "off" never asks for one.
        self.structured_output = config.structured_output
        self.takes_schema = config.structured_output != OFF
        self.schema_ignored = 0  # replies in a row, each asked twice, that were not JSON at all


class OpenAIChatModel:
    """A `pipelines.protocols.ChatModel` over an OpenAI-compatible server (greedy decoding)."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        shared: _Shared | None = None,
        priority: int = PRIORITY_BATCH,
        deadline: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._shared = shared if shared is not None else _Shared(config)
        self.priority = priority
        self.deadline = deadline  # time.monotonic() value, or None
        self._sleep = sleep

    def for_task(self, *, priority: int, time_limit_s: float | None) -> OpenAIChatModel:
        deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
        return OpenAIChatModel(
            self.config, shared=self._shared, priority=priority, deadline=deadline,
            sleep=self._sleep,
        )  # fmt: skip

    def close(self) -> None:
        self._shared.http.close()

    # --- What the server is ---

    def _learn(self) -> None:
        """The model's name (the first listed where none is set) and its context length."""
        shared = self._shared
        with shared.lock:
            if shared.model is not None and shared.context_tokens is not None:
                return
            listed = list_models(shared.http, self.config)
            if shared.model is None:
                if not listed:
                    raise ModelServerError(
                        "model_server_no_model",
                        f"The model server at {self.config.host} lists no model; set "
                        "LONGDOC_LLM_MODEL to the name of the one to use.",
                    )
                shared.model = str(listed[0].get("id"))
            entry = next((m for m in listed if m.get("id") == shared.model), None)
            length = context_length(entry) if entry is not None else None
            shared.context_tokens = length or self.config.context_tokens
            shared.structured_output = resolve(self.config.structured_output, listed, shared.model)

    @property
    def max_context_tokens(self) -> int:
        self._learn()
        return int(self._shared.context_tokens or self.config.context_tokens)

    @property
    def name(self) -> str:
        self._learn()
        return str(self._shared.model)

    def count_tokens(self, texts: Sequence[str], /) -> list[int]:
        return [math.ceil(len(text) / CHARS_PER_TOKEN) for text in texts]

    def count_chat_tokens(self, messages: Sequence[dict[str, str]], /) -> int:
        contents = [m.get("content") or "" for m in messages]
        return sum(self.count_tokens(contents)) + MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1)

    # --- Writing ---

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ServerCompletion:
        (completion,) = self.complete_many(
            [messages], max_new_tokens=max_new_tokens, on_progress=on_progress,
            on_tokens=on_tokens, response_schema=response_schema,
        )  # fmt: skip
        return completion

    def complete_many(
        self,
        conversations: Sequence[Sequence[dict[str, str]]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> list[ServerCompletion]:
        """Every conversation sent at once (up to the concurrency), the results in order.
        on_progress gets the prompt tokens of the requests answered so far (the server's
        prefill is not seen), on_tokens the tokens written so far over all of them."""
        if not conversations:
            return []
        self._learn()
        prompts = [self.count_chat_tokens(m) for m in conversations]
        tracker = _Tracker(prompts, len(conversations) * max_new_tokens, on_progress, on_tokens)
        stop = threading.Event()

        def one(index: int) -> ServerCompletion:
            return self._complete_one(
                index, conversations[index], max_new_tokens, response_schema, tracker, stop
            )

        if len(conversations) == 1:
            return [one(0)]
        workers = min(len(conversations), self.config.concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm") as pool:
            futures = [pool.submit(one, index) for index in range(len(conversations))]
            try:
                return [future.result() for future in futures]
            except BaseException:
                stop.set()  # the others end at their next chunk, or never start
                for future in futures:
                    future.cancel()
                raise

    def _complete_one(
        self,
        index: int,
        messages: Sequence[dict[str, str]],
        max_new_tokens: int,
        schema: dict[str, Any] | None,
        tracker: _Tracker,
        stop: threading.Event,
    ) -> ServerCompletion:
        shared = self._shared
        if stop.is_set():
            raise ModelServerError("cancelled", "Another request of this call failed.")
        if schema is not None and shared.takes_schema:
            try:
                reply = self._request(index, messages, max_new_tokens, schema, tracker, stop)
                if _matches(reply.text, schema):
                    shared.schema_ignored = 0
                    return _with(reply, structured=True)
                if reply.stats.get("finish_reason") == "length":
                    # Cut by the token limit: asked again, it is cut again, and it says nothing
                    # of whether the server follows the schema. The caller reads what it got.
                    return _with(reply, structured=False)
                logger.warning("model server reply does not match the schema; asking once more")
                tracker.restart(index)
                reply = self._request(index, messages, max_new_tokens, schema, tracker, stop)
                if _matches(reply.text, schema):
                    return _with(reply, structured=True)
                logger.warning("model server reply does not match the schema; plain text parsed")
                if not _is_json(reply.text):
                    _ignored_schema(shared)
                return _with(reply, structured=False)
            except SchemaRefused:
                shared.takes_schema = False
                logger.info("the model server at %s takes no JSON schema", self.config.host)
                tracker.restart(index)
        return self._request(index, messages, max_new_tokens, None, tracker, stop)

    def _request(
        self,
        index: int,
        messages: Sequence[dict[str, str]],
        max_new_tokens: int,
        schema: dict[str, Any] | None,
        tracker: _Tracker,
        stop: threading.Event,
    ) -> ServerCompletion:
        """One request, retried while the server is busy (429, 5xx) and once when its reply is
        malformed or empty."""
        body: dict[str, Any] = {
            "model": self._shared.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_new_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if schema is not None:
            body |= request_fields(self._shared.structured_output, schema)
        busy_tries, bad_tries = 0, 0
        while True:
            self._check_deadline()
            self._shared.slots.acquire(self.priority)
            try:
                return self._stream(index, body, tracker, stop)
            except Busy as busy:
                if busy_tries >= self.config.max_retries:
                    raise ModelServerError(
                        "model_server_busy",
                        f"The model server at {self.config.host} stayed busy (HTTP "
                        f"{busy.status}) after {busy_tries + 1} tries; the job can be run again.",
                    ) from None
                wait = self._backoff(busy_tries, busy.retry_after)
                busy_tries += 1
                logger.warning(
                    "model server at %s busy (HTTP %s); retry %d in %.1f s",
                    self.config.host, busy.status, busy_tries, wait,
                )  # fmt: skip
            except Malformed as bad:
                if bad_tries >= 1:
                    raise ModelServerError(
                        "model_server_bad_reply",
                        f"The model server at {self.config.host} gave a {bad.what} twice; "
                        "nothing was stored from it.",
                    ) from None
                bad_tries += 1
                wait = 0.0
                logger.warning(
                    "model server at %s gave a %s; asking once more", self.config.host, bad.what
                )
            finally:
                self._shared.slots.release()
            tracker.restart(index)
            self._sleep_until(wait)

    def _stream(
        self, index: int, body: dict[str, Any], tracker: _Tracker, stop: threading.Event
    ) -> ServerCompletion:
        config = self.config
        started = time.perf_counter()
        first_token_at: float | None = None
        parts: list[str] = []
        finish_reason: str | None = None
        usage: dict[str, Any] | None = None
        written = 0
        try:
            with self._shared.http.stream(
                "POST", f"{config.base_url}/chat/completions", json=body,
                timeout=self._timeout(),
            ) as response:  # fmt: skip
                if response.status_code != 200:
                    response.read()
                    raise_for_status(response, config, schema="response_format" in body)
                for data in events(response):
                    if stop.is_set():
                        raise ModelServerError("cancelled", "Another request of this call failed.")
                    self._check_deadline()
                    if time.perf_counter() - started > self.config.timeout_s:
                        raise httpx.ReadTimeout("the whole request took too long")
                    if data.get("error"):
                        raise Malformed("reply with an error in it")
                    if isinstance(data.get("usage"), dict):
                        usage = data["usage"]
                    for choice in data.get("choices") or ():
                        delta = choice.get("delta") or choice.get("message") or {}
                        content = delta.get("content")
                        if content:
                            if first_token_at is None:
                                first_token_at = time.perf_counter()
                                tracker.prompt_done(index)
                            parts.append(content)
                            written += 1
                            tracker.token(index)
                        if choice.get("finish_reason"):
                            finish_reason = str(choice["finish_reason"])
        except httpx.ConnectError:
            raise ModelServerError(
                "model_server_down",
                f"The model server at {config.host} did not answer; the job can be run again "
                "once it is up.",
            ) from None
        except httpx.TimeoutException:
            raise ModelServerError(
                "model_server_timeout",
                f"The model server at {config.host} did not answer within "
                f"{self._timeout():.0f} seconds.",
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError):
            raise ModelServerError(
                "model_server_down",
                f"The model server at {config.host} closed the connection before it finished; "
                "the job can be run again.",
            ) from None
        text = "".join(parts)
        if finish_reason is None:
            raise Malformed("reply that ended before it finished")
        if not text.strip():
            raise Malformed("empty reply")
        ended = time.perf_counter()
        stats = _stats(usage, body, written, text, started, first_token_at, ended, finish_reason)
        if finish_reason == "length":
            stats["cut_by_length"] = True
            logger.warning(
                "model server reply cut at the %d-token limit (finish_reason length)",
                body["max_tokens"],
            )
        metrics.record_model_request(stats)
        return ServerCompletion(text=text, stats=stats)

    # --- Time ---

    def _timeout(self) -> float:
        timeout = self.config.timeout_s
        if self.deadline is not None:
            timeout = min(timeout, max(0.1, self.deadline - time.monotonic()))
        return timeout

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise SoftTimeLimitExceeded("the model did not finish within the task's time limit")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with full jitter, at most backoff_max_s; a server's Retry-After
        (seconds) is taken when it is within that bound."""
        cap = min(self.config.backoff_max_s, self.config.backoff_s * 2**attempt)
        wait = random.uniform(cap / 2, cap)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.config.backoff_max_s))
        return wait

    def _sleep_until(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if self.deadline is not None and time.monotonic() + seconds >= self.deadline:
            raise SoftTimeLimitExceeded("the model did not finish within the task's time limit")
        self._sleep(seconds)


def _stats(usage, body, written, text, started, first_token_at, ended, finish_reason) -> dict:
    """The engine's per-request stats keys, from the server's usage where it gives it."""
    prompt_estimate = sum(
        math.ceil(len(m.get("content") or "") / CHARS_PER_TOKEN) for m in body["messages"]
    )
    usage = usage or {}
    details = usage.get("prompt_tokens_details") or {}
    prompt = usage.get("prompt_tokens")
    decoded = usage.get("completion_tokens")
    first = first_token_at if first_token_at is not None else ended
    decode_tokens = int(decoded) if isinstance(decoded, int) else written
    decode_seconds = max(0.0, ended - first)
    return {
        "backend": "openai",
        "num_prompt_tokens": int(prompt) if isinstance(prompt, int) else prompt_estimate,
        "num_cached_tokens": int(details.get("cached_tokens") or 0),
        "num_decode_tokens": decode_tokens,
        "tokens_counted_by": "server" if isinstance(decoded, int) else "estimate",
        "prefill_seconds": first - started,
        "time_to_first_token_seconds": first - started,
        "decode_seconds": decode_seconds,
        "decode_tokens_per_second": decode_tokens / decode_seconds if decode_seconds else None,
        "finish_reason": finish_reason,
    }


def _with(reply: ServerCompletion, *, structured: bool) -> ServerCompletion:
    return ServerCompletion(reply.text, {**reply.stats, "structured": structured})


# A server whose replies are not JSON at all this many times in a row, asked twice each time,
# ignores `response_format` (transformers serve does): it is asked in plain text from then on.
SCHEMA_IGNORED_LIMIT = 2


def _ignored_schema(shared: _Shared) -> None:
    with shared.lock:
        shared.schema_ignored += 1
        if shared.schema_ignored >= SCHEMA_IGNORED_LIMIT and shared.takes_schema:
            shared.takes_schema = False
            logger.info(
                "the model server at %s ignores the JSON schema; asked in plain text from now on",
                shared.config.host,
            )


_NOT_JSON = object()


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return _NOT_JSON


def _is_json(text: str) -> bool:
    return _json_value(text) is not _NOT_JSON


def _matches(text: str, schema: dict[str, Any]) -> bool:
    """Whether `text` is JSON valid against the schema (what a JSON-schema-guided server
    guarantees)."""
    value = _json_value(text)
    return value is not _NOT_JSON and jsonschema.Draft202012Validator(schema).is_valid(value)


class _Tracker:
    """Progress over the requests of one call, from their threads."""

    def __init__(self, prompts: list[int], limit: int, on_progress, on_tokens) -> None:
        self.prompts = prompts
        self.done = [False] * len(prompts)
        self.written = [0] * len(prompts)
        self.limit = limit
        self.on_progress, self.on_tokens = on_progress, on_tokens
        self._lock = threading.Lock()

    def prompt_done(self, index: int) -> None:
        with self._lock:
            self.done[index] = True
            done = sum(p for p, d in zip(self.prompts, self.done, strict=True) if d)
        if self.on_progress is not None:
            self.on_progress(done, sum(self.prompts))

    def token(self, index: int) -> None:
        metrics.record_generated_tokens()
        with self._lock:
            self.written[index] += 1
            written = sum(self.written)
        if self.on_tokens is not None:
            self.on_tokens(min(written, self.limit), self.limit)

    def restart(self, index: int) -> None:
        """A request sent again: its tokens so far count no more."""
        with self._lock:
            self.written[index] = 0
            self.done[index] = False
