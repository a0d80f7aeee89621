"""The HTTP app of `longdoc serve`: our engine behind the OpenAI-compatible API.

Every request goes into the process's one EngineLoop (worker/model/engine_holder.py), so it is
batched with every other request of that engine, LongDoc's own model tasks' included, at
PRIORITY_SERVE: after questions a person typed, before batch work (worker/serve/engine_bridge.py:
the engine seen from asyncio, a client that has gone aborted).

Keys: those the server was started with, and users' keys from the database (UserKeys,
worker/serve/user_keys.py), checked for each request in worker/serve/auth.py. A request made
with a user's key writes one audit row: the user, the key's id, the outcome and the token counts
(worker/serve/state.py).

This module holds the routes and the error handlers.

Every error is an OpenAI-style JSON body with a sentence, never a traceback. Nothing of a
prompt or an answer is logged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import metrics
from app.services import audit
from engine.engine_loop import EngineLoop
from worker.serve.auth import authorize
from worker.serve.engine_bridge import PRIORITY_SERVE, generate
from worker.serve.protocol import ApiError, ChatCompletionRequest, CompletionRequest, parse
from worker.serve.state import ServeConfig, ServeState
from worker.serve.user_keys import UserKeys

__all__ = ["PRIORITY_SERVE", "ServeConfig", "make_app"]

logger = logging.getLogger(__name__)

# The generating endpoints, as the requests counter labels them.
_ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}


def make_app(loop: EngineLoop, config: ServeConfig, user_keys: UserKeys | None = None) -> FastAPI:
    """The API over `loop`; with `user_keys`, users' keys are taken beside the configured ones."""
    state = ServeState(loop, config, user_keys)
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
        state.record(await authorize(request, state), audit.OK)
        return {"object": "list", "data": [_model_card(config, state)]}

    @app.get("/v1/models/{name:path}")
    async def model(request: Request, name: str) -> dict[str, Any]:
        caller = await authorize(request, state)
        _check_model(config, name)
        state.record(caller, audit.OK)
        return _model_card(config, state)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        caller = await authorize(request, state)
        body = parse(ChatCompletionRequest, await _read_json(request, config))
        _check_model(config, body.model)
        prompt = state.engine.apply_chat_template(body.chat())
        return await generate(request, state, caller, "chat", body, prompt)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        caller = await authorize(request, state)
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
        return await generate(request, state, caller, "completion", body, prompt)

    return app


def _model_card(config: ServeConfig, state: ServeState) -> dict[str, Any]:
    return {
        "id": config.model_name,
        "object": "model",
        "created": 0,
        "owned_by": "longdoc",
        "max_model_len": int(state.engine.max_model_len),
    }


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
