"""The HTTP app of `longdoc serve`: our engine behind the OpenAI-compatible API.

Every request goes into the process's one EngineLoop (worker/model/engine_holder.py), so it is
batched with every other request of that engine, LongDoc's own model tasks' included, at
PRIORITY_SERVE: after questions a person typed, before batch work. The asyncio side never
blocks on the engine: the loop thread wakes a request's waiter through `on_event` and the
waiter takes the queued tokens without waiting. A request whose client has gone (a stream's
write fails, or a non-streaming client disconnects) is aborted, which frees its blocks at the
engine's next step.

Keys: those the server was started with, and users' keys from the database (UserKeys,
worker/serve/user_keys.py), checked for each request in `_authorize`. A request made with a
user's key writes one audit row: the user, the key's id, the outcome and the token counts.

Every error is an OpenAI-style JSON body with a sentence, never a traceback. Nothing of a
prompt or an answer is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

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
    parse,
    sse_event,
)
from worker.serve.user_keys import KeyOwner, UserKeys

logger = logging.getLogger(__name__)

# Below a question typed in LongDoc, above summaries and key facts.
PRIORITY_SERVE = (PRIORITY_BATCH + PRIORITY_INTERACTIVE) // 2
# The generating endpoints, as the requests counter labels them.
_ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}
# How often a non-streaming request checks that its client is still there.
_DISCONNECT_CHECK_S = 1.0


@dataclass(frozen=True)
class ServeConfig:
    model_name: str
    api_keys: frozenset[str] = frozenset()  # empty: no key asked (this machine only) ...
    # ... unless some user has an API key (then every request needs a key), or this is set
    # (the server listens beyond this machine with users' keys alone).
    is_key_required: bool = False
    max_tokens: int = 4096
    max_body_bytes: int = 4 * 1024 * 1024
    max_concurrent_per_key: int = 64


class _ClientGone(Exception):
    """The client disconnected before its answer was complete."""


@dataclass
class _Caller:
    """Who sent a request: the key its concurrency is counted by ("" without one), and the user
    when it is a user's key; `is_recorded` once its audit row is queued."""

    key: str
    owner: KeyOwner | None = None
    is_recorded: bool = False


class _State:
    """The server's count of requests in the engine, in all and per key."""

    def __init__(self, loop: EngineLoop, config: ServeConfig, user_keys: UserKeys | None) -> None:
        self.loop, self.config, self.user_keys = loop, config, user_keys
        self.engine = loop.engine
        self.running = 0
        self.per_key: dict[str, int] = {}

    def acquire(self, key: str) -> Callable[[], None]:
        """Take one of the key's slots; the function returned gives it back (once)."""
        if self.per_key.get(key, 0) >= self.config.max_concurrent_per_key:
            raise ApiError(
                429,
                f"Too many requests at once for this API key (at most "
                f"{self.config.max_concurrent_per_key}); retry when one has finished.",
                type="rate_limit_error",
                code="too_many_concurrent_requests",
            )
        self.per_key[key] = self.per_key.get(key, 0) + 1
        self._set_running(+1)
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.per_key[key] -= 1
                self._set_running(-1)

        return release

    def _set_running(self, change: int) -> None:
        self.running += change
        metrics.set_serve_running(self.running)

    def record(
        self, caller: _Caller | None, outcome: str, num_prompt: int = 0, num_completion: int = 0
    ) -> None:
        """The audit row of a request made with a user's key, once per request."""
        if caller is None or caller.owner is None or caller.is_recorded:
            return
        assert self.user_keys is not None
        caller.is_recorded = True
        self.user_keys.record(
            caller.owner,
            outcome=outcome,
            num_prompt_tokens=num_prompt,
            num_completion_tokens=num_completion,
        )


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


def make_app(loop: EngineLoop, config: ServeConfig, user_keys: UserKeys | None = None) -> FastAPI:
    """The API over `loop`; with `user_keys`, users' keys are taken beside the configured ones."""
    state = _State(loop, config, user_keys)
    app = FastAPI(title="LongDoc", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve = state

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, error: ApiError) -> JSONResponse:
        endpoint = _ENDPOINTS.get(request.url.path)
        if endpoint is not None:
            metrics.record_serve_request(endpoint, str(error.status))
        outcome = audit.FAILED if error.status >= 500 else audit.REFUSED
        state.record(getattr(request.state, "caller", None), outcome)
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, error: StarletteHTTPException) -> JSONResponse:
        message = "There is no such endpoint." if error.status_code == 404 else str(error.detail)
        return JSONResponse(
            ApiError(error.status_code, message, code=str(error.status_code)).body(),
            status_code=error.status_code,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        state.record(getattr(request.state, "caller", None), audit.REFUSED)
        return JSONResponse(ApiError(400, "The request is not valid.").body(), status_code=400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        logger.error("request failed: %s", type(error).__name__)
        state.record(getattr(request.state, "caller", None), audit.FAILED)
        return JSONResponse(
            ApiError(500, "The server failed to answer this request.", type="server_error").body(),
            status_code=500,
        )

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "model": config.model_name,
            "running_requests": state.running,
            "engine_requests": loop.num_requests,
            "engine_steps": state.engine.num_steps,
        }

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

        metrics.set_serve_running(state.running)
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        state.record(await _authorize(request, state), audit.OK)
        return {"object": "list", "data": [_model_card(config, state)]}

    @app.get("/v1/models/{name:path}")
    async def model(request: Request, name: str) -> dict[str, Any]:
        caller = await _authorize(request, state)
        _check_model(config, name)
        state.record(caller, audit.OK)
        return _model_card(config, state)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        caller = await _authorize(request, state)
        body = parse(ChatCompletionRequest, await _read_json(request, config))
        _check_model(config, body.model)
        prompt = state.engine.apply_chat_template(body.chat())
        return await _generate(request, state, caller, "chat", body, prompt)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        caller = await _authorize(request, state)
        body = parse(CompletionRequest, await _read_json(request, config))
        _check_model(config, body.model)
        if isinstance(body.prompt, str) or isinstance(body.prompt[0], str):
            text = body.prompt if isinstance(body.prompt, str) else body.prompt[0]
            prompt = list(state.engine.tokenizer(text)["input_ids"])
        else:
            prompt = list(body.prompt)
            vocab = len(state.engine.tokenizer)
            if any(not 0 <= token < vocab for token in prompt):
                raise ApiError(400, f"Token ids must be from 0 to {vocab - 1}.", param="prompt")
        return await _generate(request, state, caller, "completion", body, prompt)

    return app


def _model_card(config: ServeConfig, state: _State) -> dict[str, Any]:
    return {
        "id": config.model_name,
        "object": "model",
        "created": 0,
        "owned_by": "longdoc",
        "max_model_len": int(state.engine.max_model_len),
    }


async def _authorize(request: Request, state: _State) -> _Caller:
    """Who sent the request, kept on request.state for its audit row; a 401 without a good key.
    The one place a request's key is checked: a configured key, else a user's key (an enabled
    user's, not revoked, read now), else none when the server asks for none."""
    config, user_keys = state.config, state.user_keys
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    given = given.strip() if scheme.lower() == "bearer" else ""
    caller: _Caller | None = None
    for key in config.api_keys:
        if given and hmac.compare_digest(given.encode(), key.encode()):
            caller = _Caller(key=key)
    if caller is None and given and user_keys is not None:
        owner = await run_in_threadpool(user_keys.owner, given)
        if owner is not None:
            caller = _Caller(key=f"user key {owner.key_id}", owner=owner)
    is_keyless = not config.api_keys and not config.is_key_required
    if (
        caller is None
        and is_keyless
        and (user_keys is None or not await run_in_threadpool(user_keys.has_any))
    ):
        caller = _Caller(key="")
    if caller is not None:
        request.state.caller = caller
        return caller
    raise ApiError(
        401,
        "The API key is missing or wrong: send 'Authorization: Bearer <key>' with a key that "
        "this server was started with.",
        type="invalid_request_error",
        code="invalid_api_key",
    )


def _check_model(config: ServeConfig, name: str) -> None:
    if name and name != config.model_name:
        raise ApiError(
            404,
            f"The model {name!r} does not exist here; this server serves {config.model_name!r}.",
            param="model",
            code="model_not_found",
        )


async def _read_json(request: Request, config: ServeConfig) -> Any:
    limit = config.max_body_bytes
    too_large = ApiError(
        413, f"The request body is larger than {limit} bytes.", code="request_too_large"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large
    try:
        return json.loads(body)
    except ValueError:
        raise ApiError(400, "The request body is not valid JSON.") from None


def _sampling(
    state: _State, body: ChatCompletionRequest | CompletionRequest, num_prompt: int
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


async def _generate(
    request: Request,
    state: _State,
    caller: _Caller,
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
