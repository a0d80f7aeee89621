"""Database fixtures: an empty SQLite file, an empty PostgreSQL database, and both migrated.

PostgreSQL comes from LONGDOC_TEST_POSTGRES_URL (default: the local `test` database); each test
gets its own temporary database `longdoc_test_<random>`, dropped afterwards. Tests that need it
skip, saying why, when the server cannot be reached.
"""

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.db.session import make_engine, session_factory
from app.migrate import upgrade
from worker.model.kernel_build import put_ninja_on_path

# The CLI's rich console fixes its width from COLUMNS when worker.cli.common is first imported; the caller's
# terminal (CI exports COLUMNS=80) must not decide how the tests' tables wrap. Tests that need a
# width set it themselves, at run time.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
# The tests build engines as the worker does, so the CPU attention kernel is built and tested
# under `make test` too (.venv/bin/python, the environment not activated).
put_ninja_on_path()

POSTGRES_URL = os.environ.get(
    "LONGDOC_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def shared_session_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder of this run shared by its xdist worker processes (each has its own basetemp,
    side by side under one root): what one of them builds, the others find."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / name
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Held by one process of the run at a time (the others wait for it). The lock file lies
    beside the folder, not in it: nothing but what the fixtures make is inside."""
    with folder.with_name(f".{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _default_gguf_or_skip() -> Path:
    from worker.model.source import ModelNotFoundError, find_default_gguf

    try:
        return find_default_gguf()
    except ModelNotFoundError as error:
        pytest.skip(error.message)


@pytest.fixture(scope="session")
def default_tokenizer_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model cache folder holding the default model's tokenizer (read from its GGUF file, a
    few seconds), made once per run for every xdist worker; the model's conversion goes there
    too when a test needs it (converted_model_cache)."""
    from engine.gguf_convert import ensure_tokenizer

    gguf = _default_gguf_or_skip()
    cache_dir = shared_session_dir(tmp_path_factory, "model-cache-shared")
    with locked(cache_dir):
        ensure_tokenizer(gguf, cache_dir)
    return cache_dir


@pytest.fixture(scope="session")
def converted_model_cache(default_tokenizer_cache: Path) -> Path:
    """The default model converted once per test run (about 20 s on two cores) and shared by
    every test, worker process and xdist worker that loads it: defined here only, so that
    pytest keeps one session value (a fixture re-exported by several modules would be converted
    once per module)."""
    from engine.gguf_convert import convert_gguf

    with locked(default_tokenizer_cache):
        convert_gguf(_default_gguf_or_skip(), default_tokenizer_cache)
    return default_tokenizer_cache


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'longdoc.db'}"


@pytest.fixture(scope="session")
def postgres_admin_engine() -> Iterator[Engine]:
    engine = create_engine(
        POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
    )
    try:
        with engine.connect():
            pass
    except OperationalError as error:
        engine.dispose()
        reason = str(error.orig).strip().splitlines()[0]
        pytest.skip(
            f"PostgreSQL unreachable at {engine.url.render_as_string(hide_password=True)} "
            f"({reason}); set LONGDOC_TEST_POSTGRES_URL to a server where we may create databases"
        )
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_url(postgres_admin_engine: Engine) -> Iterator[str]:
    name = f"longdoc_test_{secrets.token_hex(6)}"
    with postgres_admin_engine.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield postgres_admin_engine.url.set(database=name).render_as_string(hide_password=False)
    with postgres_admin_engine.connect() as connection:
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """An empty database of each kind."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def migrated_url(database_url: str) -> str:
    upgrade(database_url)
    return database_url


@pytest.fixture
def db_engine(migrated_url: str) -> Iterator[Engine]:
    engine = make_engine(migrated_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(db_engine: Engine) -> Iterator[Session]:
    with session_factory(db_engine)() as session:
        yield session
