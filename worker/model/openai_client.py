"""An OpenAI-compatible model server as the pipelines' ChatModel (the LONGDOC_LLM_* settings).

vLLM, SGLang, Ollama, llama.cpp's server and `transformers serve` all answer
`POST {base}/chat/completions` (the server applies its model's chat template) and
`GET {base}/models`. Every request streams (server-sent events), so a job's progress moves as
the text comes. The requests of one call go together, up to `llm_concurrency` at once over the
whole process; a question (PRIORITY_INTERACTIVE) takes the next free slot before batch work.

Token counts: the server's `usage` where it gives it; before a request, without the model's
tokenizer, a conservative estimate (a token per 3 characters: English averages about 4), so a
prompt judged to fit does fit. The context length is the server's (`max_model_len` in
/v1/models, as vLLM gives it; llama.cpp's `meta.n_ctx`), else the `llm_context_tokens` setting.

Structured output: `complete_many(..., response_schema=...)` asks for JSON matching a JSON
schema, in the request shape of the server's family (worker/model/structured_output.py:
OpenAI's `response_format` json_schema for vLLM, SGLang and Ollama, llama.cpp's own). A
server that refuses it is asked again in the next shape where the mode is "auto", else (and
after the last) in plain text, for good; a reply that does not match the
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

This module is the ChatModel (what the server is, counting, one call's requests together); one
request with its retries and deadline is worker/model/server_request.py, what a process shares
for a server (HTTP client, slots) worker/model/server_shared.py, a reply's stats and schema
checks worker/model/server_replies.py, a call's progress worker/model/server_progress.py.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pipelines.protocols import ProgressCallback, TokenProgressCallback
from worker.model.adapter import PRIORITY_BATCH
from worker.model.server_api import (
    ModelServerError,
    SchemaRefused,
    ServerConfig,
    context_length,
    list_models,
)
from worker.model.server_progress import RequestProgress
from worker.model.server_replies import (
    CHARS_PER_TOKEN,
    ServerCompletion,
    is_json,
    matches_schema,
)
from worker.model.server_request import ServerRequests
from worker.model.server_shared import SCHEMA_IGNORED_LIMIT, RequestSlots, SharedServer
from worker.model.structured_output import resolve

__all__ = [
    "CHARS_PER_TOKEN",
    "MESSAGE_OVERHEAD_TOKENS",
    "SCHEMA_IGNORED_LIMIT",
    "OpenAIChatModel",
    "RequestSlots",
    "ServerCompletion",
    "SharedServer",
]

logger = logging.getLogger(__name__)

# Each chat message adds its template's few tokens (CHARS_PER_TOKEN: server_replies.py).
MESSAGE_OVERHEAD_TOKENS = 8


class OpenAIChatModel:
    """A `pipelines.protocols.ChatModel` over an OpenAI-compatible server (greedy decoding)."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        shared: SharedServer | None = None,
        priority: int = PRIORITY_BATCH,
        deadline: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._shared = shared if shared is not None else SharedServer(config)
        self.priority = priority
        self.deadline = deadline  # time.monotonic() value, or None
        self._sleep = sleep
        self._requests = ServerRequests(
            config, self._shared, priority=priority, deadline=deadline, sleep=sleep
        )

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
        tracker = RequestProgress(
            prompts, len(conversations) * max_new_tokens, on_progress, on_tokens
        )
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
        tracker: RequestProgress,
        stop: threading.Event,
    ) -> ServerCompletion:
        shared = self._shared
        if stop.is_set():
            raise ModelServerError("cancelled", "Another request of this call failed.")
        while schema is not None and shared.takes_schema:
            shape = shared.structured_output
            try:
                return self._structured(
                    index, messages, max_new_tokens, schema, shape, tracker, stop
                )
            except SchemaRefused:
                shared.note_schema_refused(shape)
                tracker.restart(index)
        return self._requests.send(index, messages, max_new_tokens, None, None, tracker, stop)

    def _structured(
        self,
        index: int,
        messages: Sequence[dict[str, str]],
        max_new_tokens: int,
        schema: dict[str, Any],
        shape: str,
        tracker: RequestProgress,
        stop: threading.Event,
    ) -> ServerCompletion:
        """A reply asked for as JSON of `schema` in the request shape `shape`, asked once more
        when it does not match (SchemaRefused where the server refuses the shape)."""
        shared = self._shared
        reply = self._requests.send(index, messages, max_new_tokens, schema, shape, tracker, stop)
        if matches_schema(reply.text, schema):
            shared.schema_ignored = 0
            return reply.with_structured(True)
        if reply.stats.get("finish_reason") == "length":
            # Cut by the token limit: asked again, it is cut again, and it says nothing of
            # whether the server follows the schema. The caller reads what it got.
            return reply.with_structured(False)
        logger.warning("model server reply does not match the schema; asking once more")
        tracker.restart(index)
        reply = self._requests.send(index, messages, max_new_tokens, schema, shape, tracker, stop)
        if matches_schema(reply.text, schema):
            return reply.with_structured(True)
        logger.warning("model server reply does not match the schema; plain text parsed")
        if not is_json(reply.text):
            shared.note_schema_ignored()
        return reply.with_structured(False)
