"""One chat request to the model server as a task sends it (worker/model/openai_client.py):
streamed, in a slot of the process's share, retried while the server is busy (429, 5xx, with
exponential backoff and jitter, bounded) and once when its reply is malformed or empty, within
`llm_timeout_s` and the task's deadline. Two habits of llama-cpp-python's server: a stream cut
short for another request (StreamCut) is retried as from a busy server, and the process sends
one request at a time from then on; a stream with nothing in it (its answer to a prompt past
its context) is asked again unstreamed, which gets its error. Each fault ends as a
ModelServerError with a code and a sentence. Nothing here logs prompts, replies or the key:
host, status and counts only."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from celery.exceptions import SoftTimeLimitExceeded

from app import metrics
from worker.model.server_api import (
    STREAM_DONE,
    Busy,
    Malformed,
    ModelServerError,
    ServerConfig,
    StreamCut,
    events,
    raise_for_status,
)
from worker.model.server_progress import RequestProgress
from worker.model.server_replies import ServerCompletion, reply_stats
from worker.model.server_shared import SharedServer
from worker.model.structured_output import request_fields, wrapping_tokens

logger = logging.getLogger(__name__)

_EMPTY_STREAM = "reply with nothing in it"


class ServerRequests:
    """A task's requests to the server: its priority for the slots, its deadline (a
    time.monotonic() value, or None) and how it waits between tries (`sleep`)."""

    def __init__(
        self,
        config: ServerConfig,
        shared: SharedServer,
        *,
        priority: int,
        deadline: float | None,
        sleep: Callable[[float], None],
    ) -> None:
        self.config = config
        self.shared = shared
        self.priority = priority
        self.deadline = deadline
        self._sleep = sleep

    def send(
        self,
        index: int,
        messages: Sequence[dict[str, str]],
        max_new_tokens: int,
        schema: dict[str, Any] | None,
        shape: str | None,
        tracker: RequestProgress,
        stop: threading.Event,
    ) -> ServerCompletion:
        """One request, retried while the server is busy (429, 5xx) and once when its reply is
        malformed or empty; with `schema`, asked for as JSON of it in the request shape
        `shape` (worker/model/structured_output.py)."""
        body: dict[str, Any] = {
            "model": self.shared.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_new_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if schema is not None and shape is not None:
            body |= request_fields(shape, schema)
            body["max_tokens"] = max_new_tokens + wrapping_tokens(schema)
        busy_tries, bad_tries = 0, 0
        while True:
            self._check_deadline()
            self.shared.slots.acquire(self.priority)
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
            except StreamCut:
                # One request at a time from now on, or the next one cuts this one again.
                if self.shared.slots.narrow_to_one():
                    logger.warning(
                        "model server at %s cut a stream when another request came; one "
                        "request at a time from now on",
                        self.config.host,
                    )
                if busy_tries >= self.config.max_retries:
                    raise ModelServerError(
                        "model_server_busy",
                        f"The model server at {self.config.host} cut its reply short "
                        f"{busy_tries + 1} times for other requests; the job can be run again.",
                    ) from None
                wait = self._backoff(busy_tries, None)
                busy_tries += 1
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
                if bad.what == _EMPTY_STREAM:
                    # llama-cpp-python's server ends a stream with nothing in it where it
                    # answers the same request unstreamed with its error (a prompt past its
                    # context): the request goes again unstreamed, to read that error.
                    body = {k: v for k, v in body.items() if k != "stream_options"}
                    body["stream"] = False
            finally:
                self.shared.slots.release()
            tracker.restart(index)
            self._sleep_until(wait)

    def _stream(
        self, index: int, body: dict[str, Any], tracker: RequestProgress, stop: threading.Event
    ) -> ServerCompletion:
        config = self.config
        started = time.perf_counter()
        first_token_at: float | None = None
        parts: list[str] = []
        finish_reason: str | None = None
        usage: dict[str, Any] | None = None
        written = 0
        num_events, done = 0, False
        try:
            with contextlib.ExitStack() as stack:
                http = self.shared.http
                if not body["stream"]:
                    # Asked unstreamed after a stream with nothing in it, whose connection
                    # llama-cpp-python's server closes: on a connection of its own.
                    http = stack.enter_context(httpx.Client(headers=http.headers))
                url, timeout = f"{config.base_url}/chat/completions", self._timeout()
                response = stack.enter_context(http.stream("POST", url, json=body, timeout=timeout))
                if response.status_code != 200:
                    response.read()
                    raise_for_status(response, config, schema="response_format" in body)
                for data in events(response):
                    if data is STREAM_DONE:
                        done = True
                        break
                    num_events += 1
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
            if num_events == 0:
                raise Malformed(_EMPTY_STREAM)
            if done:
                raise StreamCut()
            raise Malformed("reply that ended before it finished")
        if not text.strip() and not (finish_reason == "length" and "response_format" in body):
            # (llama-server streams JSON asked for by a schema as it parses it: a reply cut
            # before its first value streams nothing, and is a reply cut short, no fault.)
            raise Malformed("reply without text")
        ended = time.perf_counter()
        stats = reply_stats(usage, body, written, started, first_token_at, ended, finish_reason)
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
