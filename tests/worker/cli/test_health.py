"""`longdoc health` against real services: a redis-server of the test's own (stopped in the
test), the database missing or unreachable, and a real `longdoc worker` answering its ping."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from app.migrate import upgrade
from tests.worker import celery_support
from tests.worker.redis_server import redis_server, spare_port  # noqa: F401 (fixture)

start_worker = celery_support.start_worker


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGDOC_")}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(celery_support.REPO), env.get("PYTHONPATH")])
    )
    env.update(LONGDOC_DATA_DIR=str(tmp_path / "data"), **values)
    return env


def _health(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [celery_support.LONGDOC, "health", *args],
        env=env,
        cwd=env["LONGDOC_DATA_DIR"].rsplit("/", 1)[0],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'longdoc.db'}"
    upgrade(url)
    return url


@pytest.mark.slow
def test_health_needs_a_worker_and_a_broker(
    tmp_path,
    database_url,
    start_worker,
    redis_server,  # noqa: F811
) -> None:
    env = _env(tmp_path, LONGDOC_DATABASE_URL=database_url, LONGDOC_BROKER_URL=redis_server.url)

    no_worker = _health(env)
    assert no_worker.returncode == 1
    assert "No LongDoc worker answered" in no_worker.stderr
    assert "Traceback" not in no_worker.stderr + no_worker.stdout

    worker_env = celery_support.worker_env(
        tmp_path, tmp_path / "models", database_url=database_url, broker_url=redis_server.url
    )
    start_worker(worker_env, "--queues=ingest")
    healthy = _health(env, "--here")
    assert healthy.returncode == 0, healthy.stderr
    assert "LongDoc is healthy." in healthy.stdout and "longdoc-ingest@" in healthy.stdout

    redis_server.stop()
    no_broker = _health(env)
    assert no_broker.returncode == 1
    assert "cannot reach its broker" in no_broker.stderr
    assert f"127.0.0.1:{redis_server.port}" in no_broker.stderr


def test_health_with_the_database_stopped_or_missing(tmp_path, redis_server) -> None:  # noqa: F811
    closed = f"postgresql+psycopg://longdoc:secret@127.0.0.1:{spare_port()}/longdoc"
    unreachable = _health(
        _env(tmp_path, LONGDOC_DATABASE_URL=closed, LONGDOC_BROKER_URL=redis_server.url),
        "--no-worker",
    )
    missing = _health(_env(tmp_path, LONGDOC_BROKER_URL=redis_server.url), "--no-worker")

    for result in (unreachable, missing):
        assert result.returncode == 1
        assert "database: failed" in result.stderr and "Traceback" not in result.stderr
        assert "broker: ok" in result.stdout  # each check says its own sentence
    assert "secret" not in unreachable.stderr  # the password is never shown
    assert "longdoc db upgrade" in missing.stderr


def test_health_of_a_healthy_embedded_setup_says_so(tmp_path, database_url) -> None:
    result = _health(_env(tmp_path, LONGDOC_DATABASE_URL=database_url))

    assert result.returncode == 0, result.stderr
    assert "LongDoc is healthy." in result.stdout
