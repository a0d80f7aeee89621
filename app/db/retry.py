"""Retries of a transaction when the database is locked by another writer, then a typed error.

SQLite lets one writer in at a time. Each connection already waits for the lock
(SQLITE_BUSY_TIMEOUT_S, app/db/session.py); when another program holds it longer than that,
the driver raises "database is locked". A whole transaction is then run again after a growing
pause (LOCK_RETRY_DELAYS_S), and after the last one DatabaseBusy says so in a sentence. On
PostgreSQL the same covers lock timeouts, deadlocks and serialization failures.

The work passed in must be a whole transaction (open a session, do, commit), safe to run again:
a failed attempt rolls back and leaves nothing behind. The error's text is never logged: even
with the engines' hide_parameters=True the statement itself is left out; the class is enough.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

from app.errors import DatabaseBusy

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Pauses between attempts, after each attempt's own busy wait: five attempts in all.
LOCK_RETRY_DELAYS_S: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
_SQLITE_LOCKED = ("database is locked", "database table is locked", "database is busy")
_POSTGRES_LOCKED = ("40001", "40P01", "55P03")  # serialization, deadlock, lock not available


def is_lock_error(error: BaseException) -> bool:
    """Whether a database error means another writer holds a lock (worth running again)."""
    if not isinstance(error, DBAPIError):
        return False
    if getattr(error.orig, "sqlstate", None) in _POSTGRES_LOCKED:
        return True
    return isinstance(error, OperationalError) and any(
        marker in str(error.orig).lower() for marker in _SQLITE_LOCKED
    )


def with_lock_retries(
    work: Callable[[], T],
    *,
    what: str,
    delays_s: tuple[float, ...] | None = None,
) -> T:
    """`work()`, run again after each of `delays_s` while the database is locked; then raise
    DatabaseBusy. `what` names the step for the log and the sentence ("storing the document")."""
    delays = LOCK_RETRY_DELAYS_S if delays_s is None else delays_s
    for attempt, delay in enumerate((*delays, None), start=1):
        try:
            return work()
        except DBAPIError as error:
            if not is_lock_error(error):
                raise
            if delay is None:
                logger.warning("database stayed busy: %s, %d attempts", what, attempt)
                raise DatabaseBusy(what) from None
            logger.info("database busy: %s, attempt %d, again in %.1f s", what, attempt, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")
