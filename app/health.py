"""Is LongDoc able to work: the database answers at the newest migration, the broker answers,
and a worker answers a ping (its heartbeat). For `longdoc health` and the compose healthchecks.

Each check gives a sentence a person understands; none raises. Nothing here reads documents.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from kombu.utils.url import maybe_sanitize_url
from sqlalchemy.exc import DBAPIError

from app.db.session import database_unavailable, display_url, make_engine, sqlite_file
from app.errors import AppError
from app.migrate import require_head
from app.services import dispatch
from app.settings import Settings

BROKER_TIMEOUT_S = 3.0
PING_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Check:
    name: str  # "database", "broker" or "worker"
    is_ok: bool
    sentence: str


def check_database(settings: Settings) -> Check:
    url = settings.database_url
    where = display_url(url)
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return Check(
            "database", False, f"There is no database at {where}; run `longdoc db upgrade`."
        )
    engine = make_engine(url)
    try:
        require_head(engine)
    except AppError as error:
        return Check("database", False, str(error))
    except DBAPIError as error:
        return Check("database", False, str(database_unavailable(url, error)))
    finally:
        engine.dispose()
    return Check("database", True, f"The database at {where} answers, at the newest migration.")


def check_broker(settings: Settings) -> Check:
    where = maybe_sanitize_url(dispatch.broker_url(settings))
    try:
        with dispatch.make_client(settings).connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_S)
    except Exception as error:  # kombu and the transports raise many types: all mean "down"
        return Check(
            "broker",
            False,
            f"LongDoc cannot reach its broker at {where} ({type(error).__name__}); "
            "check that Redis is running and LONGDOC_BROKER_URL points at it.",
        )
    return Check("broker", True, f"The broker at {where} answers.")


def check_worker(settings: Settings, *, here_only: bool = False) -> Check:
    """A worker answers a ping; with `here_only`, one on this host (a container's own worker)."""
    if settings.is_embedded_broker:
        return Check(
            "worker",
            True,
            "The embedded broker cannot ping workers; their heartbeat is not checked.",
        )
    try:
        replies = dispatch.make_client(settings).control.ping(timeout=PING_TIMEOUT_S) or []
    except Exception as error:
        return Check("worker", False, f"No worker could be asked ({type(error).__name__}).")
    names = sorted(name for reply in replies for name in reply)
    if here_only:
        host = socket.gethostname()
        names = [name for name in names if name.rpartition("@")[2] == host]
    if not names:
        where = f" on {socket.gethostname()}" if here_only else ""
        return Check(
            "worker",
            False,
            f"No LongDoc worker{where} answered within {PING_TIMEOUT_S:g} s; "
            "start one with `longdoc worker` (or `longdoc up`).",
        )
    return Check("worker", True, f"{len(names)} worker(s) answered: {', '.join(names)}.")


def check_all(settings: Settings, *, worker: bool = True, here_only: bool = False) -> list[Check]:
    """The database, then the broker, then (when the broker answers) a worker's heartbeat."""
    checks = [check_database(settings), check_broker(settings)]
    if worker and checks[-1].is_ok:
        checks.append(check_worker(settings, here_only=here_only))
    return checks
