"""Engines and sessions. One engine per process, built by the entry point; sessions are passed in."""

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.errors import DatabaseUnavailable

SQLITE_BUSY_TIMEOUT_S = 15.0
# The execution option that marks a transaction a write (write_transaction).
WRITE_OPTION = "longdoc_write"
_WRITE_STATEMENTS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER")
POSTGRES_CONNECT_TIMEOUT_S = 10


def make_engine(url: str, *, sqlite_foreign_keys: bool = True) -> Engine:
    """An engine for `url`. SQLite gets foreign keys, WAL and a busy timeout on every connection,
    and BEGIN IMMEDIATE for write transactions (those that start by writing, and those marked
    by write_transaction), so writers queue for the lock instead of failing.

    Migrations pass `sqlite_foreign_keys=False`: SQLite's table rebuilds (batch mode) drop tables,
    and with enforcement on a DROP TABLE runs ON DELETE CASCADE on the child rows.
    """
    backend = make_url(url).get_backend_name()
    # hide_parameters: an error's text (logged, or shown in a traceback) never quotes the
    # values of a statement, which hold titles, file names, page text and questions.
    if backend == "postgresql":
        # Fail within seconds, not minutes, when the server is down.
        return create_engine(
            url,
            pool_pre_ping=True,
            hide_parameters=True,
            connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S},
        )
    if backend != "sqlite":
        return create_engine(url, pool_pre_ping=True, hide_parameters=True)
    engine = create_engine(url, hide_parameters=True)
    is_file = sqlite_file(url) is not None

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # sqlite3 on Python < 3.12 emits BEGIN only before DML, which leaves DDL and SAVEPOINT
        # outside the transaction; we turn that off and emit BEGIN ourselves (_on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA foreign_keys = {'ON' if sqlite_foreign_keys else 'OFF'}")
        if is_file:
            # Readers do not block the writer (UI reading while the worker stores a document).
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # A transaction marked a write (write_transaction) takes the write lock at once. Any
        # other emits its BEGIN with its first statement (_before_execute), knowing its kind.
        if connection.get_execution_options().get(WRITE_OPTION):
            try:
                connection.connection.dbapi_connection.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                # Raised here, outside any statement, SQLAlchemy would pass the driver's error
                # on as it is; wrapped as its statements' errors are, a lock that outlasted the
                # busy timeout is retried like any other (app.db.retry, the tasks' autoretry).
                raise OperationalError("BEGIN IMMEDIATE", None, error) from error

    @event.listens_for(engine, "before_cursor_execute")
    def _before_execute(connection: Any, cursor: Any, statement: str, *_: Any) -> None:
        dbapi_connection = connection.connection.dbapi_connection
        if dbapi_connection is None or dbapi_connection.in_transaction:
            return
        if not connection.in_transaction() or statement.lstrip()[:5].upper() == "BEGIN":
            return  # outside SQLAlchemy's transactions (none in our code): autocommit
        # BEGIN IMMEDIATE for a transaction that starts by writing: it waits (busy timeout) for
        # the write lock up front. A deferred one that read first and then writes cannot wait:
        # SQLite fails it at once with "database is locked" when another wrote meanwhile.
        is_write = statement.lstrip()[:7].upper().startswith(_WRITE_STATEMENTS)
        cursor.execute("BEGIN IMMEDIATE" if is_write else "BEGIN")

    return engine


def write_transaction(session: Session) -> Session:
    """Mark the session's next transaction a write: on SQLite it begins with BEGIN IMMEDIATE, so
    it waits for the write lock (up to the busy timeout) before it reads anything, instead of
    failing with "database is locked" when it writes after another writer's commit. For
    read-then-write work (a job row updated); a session already in a transaction is left as is.
    Other databases ignore the mark. Returns the session."""
    if not session.in_transaction():
        session.connection(execution_options={WRITE_OPTION: True})
    return session


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine)


def sqlite_file(url: str) -> Path | None:
    """The file behind a SQLite URL; None for other databases and in-memory SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def display_url(url: str) -> str:
    """Where the database is, for messages: a SQLite file's path, else the URL without password."""
    path = sqlite_file(url)
    if path is not None:
        return str(path)
    return make_url(url).render_as_string(hide_password=True)


def database_unavailable(url: str, error: DBAPIError) -> DatabaseUnavailable:
    """A typed error for a driver error. Uses only the driver's first line: SQLAlchemy's own
    message quotes the statement's parameters, which may be document text."""
    lines = str(error.orig).strip().splitlines()
    reason = lines[0][:300] if lines else "no reason given"
    return DatabaseUnavailable(display_url(url), reason)
