"""The engine behind `longdoc serve` (worker/serve/app.py): a generating request turned into
sampling parameters, submitted to the process's one EngineLoop at PRIORITY_SERVE, and its text
taken as it comes, whole or as server-sent events.

The asyncio side never blocks on the engine: the loop thread wakes a request's waiter through
`on_event` and the waiter takes the queued tokens without waiting. A request whose client has
gone (a stream's write fails, or a non-streaming client disconnects) is aborted, which frees its
blocks at the engine's next step. Nothing of a prompt or an answer is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app import metrics
from app.services import audit
from engine import SamplingParams
from engine.engine_loop import EngineLoop
from engine.request import GenerationResult
from worker.model.adapter import PRIORITY_BATCH, PRIORITY_INTERACTIVE
from worker.serve.protocol import (
    ApiError,
    ChatCompletionRequest,
    CompletionRequest,
    Reply,
    sse_event,
)
from worker.serve.state import Caller, ServeState

logger = logging.getLogger(__name__)

# Below a question typed in LongDoc, above summaries and key facts.
PRIORITY_SERVE = (PRIORITY_BATCH + PRIORITY_INTERACTIVE) // 2
# How often a non-streaming request checks that its client is still there.
_DISCONNECT_CHECK_S = 1.0


class _ClientGone(Exception):
    """The client disconnected before its answer was complete."""


class _EngineStream:
    """One engine request seen from asyncio: its text as it comes, then its result."""

    def __init__(self, loop: EngineLoop, prompt: list[int], params: SamplingParams) -> None:
        aio = asyncio.get_running_loop()
        self._wake = asyncio.Event()

        def notify() -> None:  # on the engine's loop thread
            # RuntimeError: the event loop has closed, nobody waits any more.
            with contextlib.suppress(RuntimeError):
                aio.call_soon_threadsafe(self._wake.set)

        self.handle = loop.submit(prompt, params, priority=PRIORITY_SERVE, on_event=notify)
        self.result: GenerationResult | None = None

    async def pieces(self, is_disconnected: Callable[[], Any] | None = None) -> AsyncIterator[str]:
        """Text pieces as the engine writes them; self.result is set at the end. With
        is_disconnected, the wait checks the client now and then (non-streaming requests)."""
        pieces: list[str] = []
        next_check = time.monotonic() + _DISCONNECT_CHECK_S
        while self.result is None:
            self._wake.clear()
            pieces.clear()
            self.result = self.handle.poll(on_token=lambda _id, d: pieces.append(d), timeout=0)
            if text := "".join(pieces):
                yield text
            if self.result is not None:
                return
            if is_disconnected is None:
                await self._wake.wait()
                continue
            # Tokens may wake the wait every step: the client is checked by the clock.
            if time.monotonic() >= next_check:
                if await is_disconnected():
                    raise _ClientGone()
                next_check = time.monotonic() + _DISCONNECT_CHECK_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), _DISCONNECT_CHECK_S)

    def cancel(self) -> None:
        if self.result is None:
            self.handle.cancel()


class _ClosingStream(StreamingResponse):
    """A streaming response that always closes its generator (and so aborts its engine request
    and frees its slot) when the response ends, whether the client read it all or left."""

    def __init__(self, content: AsyncIterator[bytes], cleanup: Callable[[], None], **kw) -> None:
        super().__init__(content, **kw)
        self._cleanup = cleanup

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]
            self._cleanup()  # also when the generator never started (its finally never ran)


def _sampling(
    state: ServeState, body: ChatCompletionRequest | CompletionRequest, num_prompt: int
) -> SamplingParams:
    context = int(state.engine.max_model_len)
    requested = body.requested_max_tokens
    cap = state.config.max_tokens
    if requested is not None and requested > cap:
        raise ApiError(
            400,
            f"max_tokens is {requested}, more than this server allows ({cap}).",
            param="max_tokens",
            code="max_tokens_too_large",
        )
    max_tokens = requested if requested is not None else min(cap, context - num_prompt)
    if num_prompt + max(max_tokens, 1) > context:
        raise ApiError(
            400,
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{num_prompt + max_tokens} tokens ({num_prompt} in the prompt, {max_tokens} in the "
            "completion). Please reduce the length of the prompt or of max_tokens.",
            param="messages" if isinstance(body, ChatCompletionRequest) else "prompt",
            code="context_length_exceeded",
        )
    # Plain sampling as asked: none of LongDoc's own repetition controls.
    return SamplingParams(
        max_new_tokens=max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        stop_strings=body.stop_strings(),
        seed=body.seed,
        ignore_eos=body.ignore_eos,
        frequency_penalty=body.frequency_penalty,
        presence_penalty=body.presence_penalty,
        stop_on_loop=False,
    )


async def generate(
    request: Request,
    state: ServeState,
    caller: Caller,
    kind: str,
    body: ChatCompletionRequest | CompletionRequest,
    prompt: list[int],
) -> Response:
    endpoint = "chat" if kind == "chat" else "completions"
    params = _sampling(state, body, len(prompt))
    release = state.acquire(caller.key)
    try:
        stream = _EngineStream(state.loop, prompt, params)
    except BaseException:
        release()
        raise
    reply = Reply(kind, state.config.model_name, len(prompt))
    if body.stream:

        def record(outcome: str, result: GenerationResult | None) -> None:
            state.record(caller, outcome, len(prompt), len(result.token_ids) if result else 0)

        def cleanup() -> None:
            stream.cancel()
            release()
            record(audit.FAILED, None)  # when the stream never started (else recorded already)

        return _ClosingStream(
            _sse(stream, reply, body.include_usage, endpoint, release, record),
            cleanup,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    outcome = "disconnected"
    try:
        text = "".join([piece async for piece in stream.pieces(request.is_disconnected)])
        result = stream.result
        assert result is not None
        outcome = result.finish_reason
    except _ClientGone:
        state.record(caller, audit.FAILED, len(prompt))
        return Response(status_code=499)
    except Exception as error:  # the engine failed this request (out of memory, ...)
        outcome = ""  # counted by the ApiError handler
        raise ApiError(
            500, _engine_failure(error), type="server_error", code="engine_error"
        ) from None
    finally:
        stream.cancel()
        release()
        if outcome:
            metrics.record_serve_request(endpoint, outcome)
    _record(result)
    state.record(caller, audit.OK, len(prompt), len(result.token_ids))
    return JSONResponse(reply.whole(text, result))


async def _sse(
    stream: _EngineStream,
    reply: Reply,
    include_usage: bool,
    endpoint: str,
    release: Callable[[], None],
    record: Callable[[str, GenerationResult | None], None],
) -> AsyncIterator[bytes]:
    outcome = "disconnected"
    try:
        if reply.kind == "chat":
            yield sse_event(reply.chunk({"role": "assistant", "content": ""}, None, include_usage))
        try:
            async for piece in stream.pieces():
                yield sse_event(reply.piece(piece, include_usage))
        except Exception as error:  # the engine failed this request
            outcome = "500"
            yield sse_event(
                ApiError(
                    500, _engine_failure(error), type="server_error", code="engine_error"
                ).body()
            )
            yield b"data: [DONE]\n\n"
            return
        result = stream.result
        assert result is not None
        outcome = result.finish_reason
        _record(result)
        yield sse_event(reply.last(result, include_usage))
        if include_usage:
            yield sse_event(reply.usage_chunk(result))
        yield b"data: [DONE]\n\n"
    finally:
        stream.cancel()  # the client left: abort, freeing the blocks at the next step
        release()
        metrics.record_serve_request(endpoint, outcome)
        record(audit.OK if stream.result is not None else audit.FAILED, stream.result)


def _engine_failure(error: BaseException) -> str:
    logger.error("engine request failed: %s", type(error).__name__)
    return "The model failed to write this answer; retry, or send a shorter request."


def _record(result: GenerationResult) -> None:
    stats = result.stats.to_dict()
    stats["finish_reason"] = result.finish_reason
    metrics.record_model_request(stats)
    metrics.record_generated_tokens(len(result.token_ids))
