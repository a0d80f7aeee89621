"""What every task of a process shares for one model server (worker/model/openai_client.py): the
HTTP client, the request slots, and what was learnt of the server (its model, its context
length, whether it takes a JSON schema)."""

from __future__ import annotations

import logging
import threading

import httpx

from worker.model.server_api import ServerConfig
from worker.model.structured_output import OFF, after_refusal

logger = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 10.0
# A server whose replies are not JSON at all this many times in a row, asked twice each time,
# ignores `response_format` (transformers serve does): it is asked in plain text from then on.
SCHEMA_IGNORED_LIMIT = 2


class RequestSlots:
    """At most `size` requests at once; a waiting request of higher priority goes first."""

    def __init__(self, size: int) -> None:
        self.size = size
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

    def narrow_to_one(self) -> bool:
        """One request at a time from now on (those under way end first); whether it was
        more."""
        with self._cond:
            if self.size <= 1:
                return False
            self.free -= self.size - 1
            self.size = 1
            return True


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

    def note_schema_refused(self, shape: str) -> None:
        """The server refused a JSON schema asked in `shape`: asked in the next shape from then
        on (worker/model/structured_output.py's after_refusal), or in plain text. A shape
        another request moved on from already changes nothing."""
        with self.lock:
            if not self.takes_schema or self.structured_output != shape:
                return
            following = after_refusal(self.config.structured_output, shape)
            if following == OFF:
                self.takes_schema = False
                logger.info("the model server at %s takes no JSON schema", self.config.host)
            else:
                logger.info(
                    "the model server at %s refused a JSON schema as %s; asking as %s",
                    self.config.host, shape, following,
                )  # fmt: skip
            self.structured_output = following

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
