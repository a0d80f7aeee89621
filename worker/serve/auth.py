"""Who sent a request to `longdoc serve` (worker/serve/app.py): the one place a request's key is
checked. Keys: those the server was started with, and users' keys from the database
(worker/serve/user_keys.py), read for each request. Keys are compared in constant time and never
logged."""

from __future__ import annotations

import hmac

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from worker.serve.protocol import ApiError
from worker.serve.state import Caller, ServeState


async def authorize(request: Request, state: ServeState) -> Caller:
    """Who sent the request, kept on request.state for its audit row; a 401 without a good key.
    The one place a request's key is checked: a configured key, else a user's key (an enabled
    user's, not revoked, read now), else none when the server asks for none."""
    config, user_keys = state.config, state.user_keys
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    given = given.strip() if scheme.lower() == "bearer" else ""
    caller: Caller | None = None
    for key in config.api_keys:
        if given and hmac.compare_digest(given.encode(), key.encode()):
            caller = Caller(key=key)
    if caller is None and given and user_keys is not None:
        owner = await run_in_threadpool(user_keys.owner, given)
        if owner is not None:
            caller = Caller(key=f"user key {owner.key_id}", owner=owner)
    is_keyless = not config.api_keys and not config.is_key_required
    if (
        caller is None
        and is_keyless
        and (user_keys is None or not await run_in_threadpool(user_keys.has_any))
    ):
        caller = Caller(key="")
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
