"""What `longdoc serve` keeps while it runs (worker/serve/app.py): its configuration, who sent
each request, and its count of requests in the engine, in all and per key, with the audit row
of a request made with a user's key."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app import metrics
from engine.engine_loop import EngineLoop
from worker.serve.protocol import ApiError
from worker.serve.user_keys import KeyOwner, UserKeys


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


@dataclass
class Caller:
    """Who sent a request: the key its concurrency is counted by ("" without one), and the user
    when it is a user's key; `is_recorded` once its audit row is queued."""

    key: str
    owner: KeyOwner | None = None
    is_recorded: bool = False


class ServeState:
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
        self, caller: Caller | None, outcome: str, num_prompt: int = 0, num_completion: int = 0
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
