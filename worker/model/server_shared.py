"""What every task of a process shares for one model server (worker/model/openai_client.py): the
HTTP client, the request slots, and what was learnt of the server (its model, its context
length, whether it takes a JSON schema)."""

from __future__ import annotations

import logging
import threading

import httpx

from worker.model.server_api import ServerConfig
from worker.model.structured_output import OFF

logger = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 10.0
# A server whose replies are not JSON at all this many times in a row, asked twice each time,
# ignores `response_format` (transformers serve does): it is asked in plain text from then on.
SCHEMA_IGNORED_LIMIT = 2


class RequestSlots:
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


class SharedServer:
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
        self.slots = RequestSlots(config.concurrency)
        self.lock = threading.Lock()
        self.model: str | None = config.model or None
        self.context_tokens: int | None = None
        # The request shape for a JSON schema (worker/model/structured_output.py), resolved
        # from /v1/models when "auto"; "off" never asks for one.
        self.structured_output = config.structured_output
        self.takes_schema = config.structured_output != OFF
        self.schema_ignored = 0  # replies in a row, each asked twice, that were not JSON at all

    def note_schema_ignored(self) -> None:
        """One more reply in a row that was not JSON at all; at SCHEMA_IGNORED_LIMIT the server
        is asked in plain text from then on."""
        with self.lock:
            self.schema_ignored += 1
            if self.schema_ignored >= SCHEMA_IGNORED_LIMIT and self.takes_schema:
                self.takes_schema = False
                logger.info(
                    "the model server at %s ignores the JSON schema; asked in plain text from now "
                    "on",
                    self.config.host,
                )
