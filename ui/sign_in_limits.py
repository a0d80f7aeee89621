"""Limits on guessing the UI password: per client, for everyone, and on hashing at once.

- Per client (its IP address as Streamlit sees it; the session where there is none):
  MAX_CLIENT_FAILURES wrong passwords within WINDOW_S lock that client out until the oldest of
  them is WINDOW_S old. A right password clears the client's record.
- For everyone: MAX_GLOBAL_FAILURES wrong passwords within WINDOW_S, from any clients, pause
  every sign-in the same way, which bounds guessing from many addresses. (The price: a flood of
  wrong passwords also keeps the real user out for up to WINDOW_S.)
- Hashing: a password is hashed (PBKDF2, about 0.3 s) by at most MAX_CONCURRENT_HASHES sign-ins
  at once; one that waits longer than HASH_WAIT_S is told to try again. A refused attempt is
  never hashed, so a locked-out client costs nothing.

State lives in this process (the UI is one process), and is lost when it restarts.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MAX_CLIENT_FAILURES = 5
MAX_GLOBAL_FAILURES = 20
WINDOW_S = 15 * 60.0
MAX_CONCURRENT_HASHES = 2
HASH_WAIT_S = 5.0


class SignInRefused(Exception):
    """A sign-in attempt refused before its password was looked at; the sentence says why."""


class SignInLimiter:
    def __init__(
        self,
        *,
        max_client_failures: int = MAX_CLIENT_FAILURES,
        max_global_failures: int = MAX_GLOBAL_FAILURES,
        window_s: float = WINDOW_S,
        max_concurrent_hashes: int = MAX_CONCURRENT_HASHES,
        hash_wait_s: float = HASH_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_client_failures = max_client_failures
        self.max_global_failures = max_global_failures
        self.window_s = window_s
        self.hash_wait_s = hash_wait_s
        self._clock = clock
        self._lock = threading.Lock()
        self._client_failures: dict[str, deque[float]] = {}
        self._global_failures: deque[float] = deque()
        self._hash_slots = threading.BoundedSemaphore(max_concurrent_hashes)

    def check(self, client: str) -> None:
        """Raise SignInRefused when `client`, or everyone, is locked out now."""
        with self._lock:
            now = self._clock()
            self._forget_old(now)
            failures = self._client_failures.get(client, ())
            if len(failures) >= self.max_client_failures:
                raise SignInRefused(
                    f"Too many wrong passwords from this computer: sign-in is locked for "
                    f"{_minutes(failures[0] + self.window_s - now)}. Check the password with "
                    "whoever runs LongDoc, then try again."
                )
            if len(self._global_failures) >= self.max_global_failures:
                raise SignInRefused(
                    "LongDoc has received many wrong passwords in the last minutes, so sign-in "
                    f"is paused for everyone for {_minutes(self._global_failures[0] + self.window_s - now)}. "
                    "Try again then."
                )

    def record_failure(self, client: str) -> None:
        with self._lock:
            now = self._clock()
            self._client_failures.setdefault(client, deque()).append(now)
            self._global_failures.append(now)

    def record_success(self, client: str) -> None:
        with self._lock:
            self._client_failures.pop(client, None)

    @contextmanager
    def hashing(self) -> Iterator[None]:
        """A slot to hash a password in; SignInRefused when none frees up in time."""
        if not self._hash_slots.acquire(timeout=self.hash_wait_s):
            raise SignInRefused("Sign-in is busy right now. Wait a few seconds and try again.")
        try:
            yield
        finally:
            self._hash_slots.release()

    def _forget_old(self, now: float) -> None:
        cutoff = now - self.window_s
        while self._global_failures and self._global_failures[0] <= cutoff:
            self._global_failures.popleft()
        for client, failures in list(self._client_failures.items()):
            while failures and failures[0] <= cutoff:
                failures.popleft()
            if not failures:
                del self._client_failures[client]


def _minutes(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"{minutes} more minute{'s' if minutes != 1 else ''}"


# The UI process's one limiter, shared by every browser session.
limiter = SignInLimiter()
