"""A Redis database of the shared server that this test alone uses, claimed atomically.

Tests run side by side (pytest-xdist workers, or two checkouts' suites on one machine), so
"the first empty database" could be picked by two of them at once. A database is claimed with
SET NX on a key in database 0, which no test uses, and released (flushed, then unclaimed)
afterwards; a claim expires after an hour, so one left by a killed run frees itself.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

REDIS_BASE = os.environ.get("LONGDOC_TEST_REDIS_URL", "redis://127.0.0.1:6379")
CLAIM_TTL_S = 3600


@contextmanager
def claimed_redis_db() -> Iterator[str]:
    """The URL of an empty Redis database 1-15 held for the duration; skips, saying why, when
    the server is unreachable or every database is taken."""
    redis = pytest.importorskip("redis")
    token = secrets.token_hex(8)
    try:
        registry = redis.Redis.from_url(f"{REDIS_BASE}/0", socket_connect_timeout=2)
        for db in range(15, 0, -1):
            key = f"longdoc-test:db:{db}"
            if not registry.set(key, token, nx=True, ex=CLAIM_TTL_S):
                continue
            url = f"{REDIS_BASE}/{db}"
            if redis.Redis.from_url(url, socket_connect_timeout=2).dbsize() == 0:
                break
            registry.delete(key)  # someone else's data: leave it alone
        else:
            pytest.skip(f"Redis at {REDIS_BASE} has no free, empty database among 1-15")
    except redis.exceptions.ConnectionError as error:
        pytest.skip(f"Redis unreachable at {REDIS_BASE} ({error}); set LONGDOC_TEST_REDIS_URL")
    try:
        yield url
    finally:
        redis.Redis.from_url(url).flushdb()
        if registry.get(key) == token.encode():
            registry.delete(key)
