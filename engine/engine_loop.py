"""One thread drives an engine; any number of other threads submit requests and wait on them.

This is how one copy of the weights serves every model task of a GPU worker at once (Celery's
threads pool): each task thread submits its prompts and blocks on its handle, while the loop
thread runs engine steps over all of them together. Callbacks never run on the loop thread:
token deltas and progress are queued to the handle and delivered in the waiting thread, so a
slow callback (a database write) never holds up the other requests' steps. A waiter that is
not a thread (an asyncio server) passes `on_event`: the loop thread calls it after queueing each
event, to wake the waiter; it must be cheap and must not raise (loop.call_soon_threadsafe).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.llm_engine import LLMEngine
from engine.request import GenerationResult, ProgressCallback, TokenCallback
from engine.sampling_params import SamplingParams

logger = logging.getLogger(__name__)

# The loop sleeps at most this long with nothing to do before it looks at its inbox again.
IDLE_POLL_S = 0.5
_TOKEN, _PROGRESS, _DONE = "token", "progress", "done"


class RequestTimeout(TimeoutError):
    """A request did not finish by its deadline; it was aborted and its blocks freed."""


class RequestHandle:
    """What submit() returns: wait() delivers the callbacks in the calling thread and returns the
    result (or raises the request's error); cancel() aborts it."""

    def __init__(self, loop: EngineLoop, on_event: Callable[[], None] | None = None) -> None:
        self._loop = loop
        self._on_event = on_event
        self._events: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        self.request_id: int | None = None
        self._result: GenerationResult | None = None

    def wait(
        self,
        *,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
        deadline: float | None = None,
    ) -> GenerationResult:
        """Block until the request is done; deadline is a time.monotonic() value."""
        while True:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                self.cancel()
                raise RequestTimeout("The model did not finish in time.")
            result = self.poll(on_token=on_token, on_progress=on_progress, timeout=timeout)
            if result is not None:
                return result

    def poll(
        self,
        *,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = 0.0,
    ) -> GenerationResult | None:
        """Deliver the events that have come, waiting at most `timeout` seconds for the first
        (None: as long as it takes); the result once the request is done (its error raised),
        else None. A caller with several requests polls each in turn, so every one's tokens
        reach it as they come."""
        block_s = timeout
        while self._result is None:
            try:
                if block_s is not None and block_s <= 0:
                    kind, *args = self._events.get_nowait()
                else:
                    kind, *args = self._events.get(timeout=block_s)
            except queue.Empty:
                return None
            block_s = 0.0  # the first event came: take the rest without waiting
            if kind == _DONE:
                self._result = args[0]
            elif kind == _TOKEN and on_token is not None:
                self._call(on_token, *args)
            elif kind == _PROGRESS and on_progress is not None:
                self._call(on_progress, *args)
        if self._result.error is not None:
            raise self._result.error
        return self._result

    def cancel(self) -> None:
        self._loop.post(("abort", self))

    def _call(self, callback: Callable, *args: object) -> None:
        try:
            callback(*args)
        except BaseException:
            self.cancel()  # the caller gives up on this request: free its blocks now
            raise

    # Called on the loop thread.
    def _push(self, *event: object) -> None:
        self._events.put(event)
        if self._on_event is not None:
            self._on_event()


@dataclass
class _Submission:
    prompt_token_ids: list[int]
    params: SamplingParams
    priority: int
    handle: RequestHandle
    cache_tag: str | None = None


class EngineLoop:
    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        self._inbox: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        self._handles: dict[int, RequestHandle] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
        self._thread.start()

    def submit(
        self,
        prompt_token_ids: Sequence[int],
        params: SamplingParams,
        *,
        priority: int = 0,
        on_event: Callable[[], None] | None = None,
        cache_tag: str | None = None,
    ) -> RequestHandle:
        """cache_tag: the document the prompt's KV belongs to (LLMEngine.add_request)."""
        handle = RequestHandle(self, on_event)
        submission = _Submission(list(prompt_token_ids), params, priority, handle, cache_tag)
        self.post(("add", submission))
        return handle

    def generate_many(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams | Sequence[SamplingParams],
        *,
        priority: int = 0,
        deadline: float | None = None,
    ) -> list[GenerationResult]:
        """Submit every prompt at once and wait for all; results in order."""
        all_params = [params] * len(prompts) if isinstance(params, SamplingParams) else params
        handles = [
            self.submit(p, q, priority=priority) for p, q in zip(prompts, all_params, strict=True)
        ]
        try:
            return [handle.wait(deadline=deadline) for handle in handles]
        except BaseException:
            for handle in handles:
                handle.cancel()
            raise

    @property
    def num_requests(self) -> int:
        """Requests in the engine now (added and neither finished nor aborted yet)."""
        return len(self._handles)

    def forget_cache_tag(self, tag: str) -> None:
        """Drop a tag's KV from every tier, on the loop's thread (LLMEngine.forget_cache_tag)."""
        self.post(("forget", tag))

    def post(self, message: tuple) -> None:
        self._inbox.put(message)

    def close(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self.post(("wake",))
        self._thread.join(timeout)

    # ---- the loop thread ------------------------------------------------------------------

    def _run(self) -> None:
        """Between the engine's steps: the inbox (submissions and aborts from other threads),
        the wait of an idle engine, and each finished request's result to its handle; a step
        that raises fails the requests running, and the loop goes on. LLMEngine.step runs the
        step itself."""
        engine = self.engine
        while not self._stopping.is_set():
            idle = not engine.has_unfinished_requests()
            wait = IDLE_POLL_S if idle else engine.wait_time()
            self._drain(block=wait > 0, timeout=wait)
            if not engine.has_unfinished_requests():
                engine.poll_kv_tiers()  # a document deleted meanwhile leaves every tier
                continue
            try:
                results = engine.step()
            except Exception as exc:  # a bug or a device fault: fail what is running, go on
                logger.exception("engine step failed; its requests are ended")
                self._fail_all(exc)
                continue
            for result in results:
                handle = self._handles.pop(result.request_id, None)
                if handle is not None:
                    handle._push(_DONE, result)

    def _drain(self, *, block: bool, timeout: float) -> None:
        try:
            message = self._inbox.get(timeout=timeout) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            self._handle(message)
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _handle(self, message: tuple) -> None:
        kind = message[0]
        if kind == "add":
            self._add(message[1])
        elif kind == "forget":
            try:
                self.engine.forget_cache_tag(message[1])
            except (OSError, ValueError):
                logger.exception("forgetting a cache tag failed")
        elif kind == "abort":
            handle = message[1]
            if handle.request_id is not None and self._handles.pop(handle.request_id, None):
                result = self.engine.abort(handle.request_id)
                if result is not None:
                    handle._push(_DONE, result)

    def _add(self, submission: _Submission) -> None:
        handle = submission.handle
        try:
            handle.request_id = self.engine.add_request(
                submission.prompt_token_ids,
                submission.params,
                priority=submission.priority,
                cache_tag=submission.cache_tag,
                on_token=lambda token_id, delta: handle._push(_TOKEN, token_id, delta),
                on_progress=lambda done, total, chunks: handle._push(
                    _PROGRESS, done, total, chunks
                ),
            )
        except Exception as exc:  # a prompt the engine refuses: that request fails alone
            handle._push(_DONE, _failed(exc))
            return
        self._handles[handle.request_id] = handle

    def _fail_all(self, exc: Exception) -> None:
        for request_id, handle in list(self._handles.items()):
            self.engine.abort(request_id)
            handle._push(_DONE, _failed(exc))
        self._handles.clear()


def _failed(exc: BaseException) -> GenerationResult:
    from engine.stats import RequestStats

    return GenerationResult([], "", "abort", RequestStats(), error=exc)
