"""Real worker processes for the Celery tests: started with `longdoc worker`, always stopped.

Each worker runs in its own session (process group), so a test can SIGKILL a whole worker, pool
children included, the way a machine losing power would. Every start has a bounded wait and every
worker is stopped by the fixture's finalizer, killed if it does not stop in time.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind, JobStatus, Summary
from app.db.session import make_engine
from app.migrate import upgrade
from app.services import dispatch, file_store, jobs
from app.settings import Settings
from worker.celery_app import make_celery

LONGDOC = str(Path(sys.executable).parent / "longdoc")
REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 120.0


def default_gguf() -> Path:
    from worker.model.source import ModelNotFoundError, find_default_gguf

    try:
        return find_default_gguf()
    except ModelNotFoundError as error:
        pytest.skip(error.message)


class WorkerProcess:
    """One `longdoc worker` in its own process group, its output in a log file."""

    def __init__(self, env: dict[str, str], log_path: Path, args: list[str]) -> None:
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(
            [LONGDOC, "worker", *args],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if " ready." in self.log():
                return
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited early:\n{self.log()[-3000:]}")
            time.sleep(0.2)
        raise AssertionError(f"worker not ready in {timeout_s} s:\n{self.log()[-3000:]}")

    def pool_children(self) -> list[int]:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except FileNotFoundError:
            return []

    def kill_all(self) -> None:
        """SIGKILL the worker and its pool children at once (the whole process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def request_stop(self) -> None:
        """Ask for a cold shutdown (do not wait for tasks) and return at once; `stop` waits."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGQUIT)

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is None:
            self.request_stop()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill_all()
        self._log.close()


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(env: dict[str, str], *args: str, wait: bool = True) -> WorkerProcess:
        """Start a worker; with wait=False the caller calls wait_ready (workers started
        together start in parallel)."""
        worker = WorkerProcess(env, tmp_path / f"worker-{len(started)}.log", list(args))
        started.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    yield start
    # The test is over and nothing a worker would still write is read: killed at once. A cold
    # shutdown took 5-8 s even when idle (its broker loop's poll, then the interpreter's exit),
    # and a threads pool still writing a summary waited for it (30 s seen twice a run).
    for worker in started:
        worker.kill_all()
        worker.stop()  # closes its log


def worker_env(
    tmp_path: Path, model_cache: Path, *, database_url: str, broker_url: str = "", **extra: str
) -> dict[str, str]:
    """The environment of a worker (and of Settings in the test) for one test's folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGDOC_")}
    # The `longdoc` script imports from wherever the package was installed (an editable install
    # of another checkout, say): put this checkout first so its code is what runs.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(
        LONGDOC_DATA_DIR=str(tmp_path / "data"),
        LONGDOC_MODEL_CACHE_DIR=str(model_cache),
        LONGDOC_DATABASE_URL=database_url,
        LONGDOC_BROKER_URL=broker_url,
        LONGDOC_ENGINE_DEVICE="cpu",
        LONGDOC_ENGINE_NUM_THREADS="2",
        LONGDOC_SUMMARY_MAX_NEW_TOKENS="24",
        LONGDOC_INBOX_SCAN_ENABLED="false",
        LONGDOC_AUTO_SUMMARIZE_ENABLED="false",
        # These tests time summaries and questions; a key-facts job after each ingest would
        # only add model work before them (the facts' own tests: tests/worker/jobs).
        LONGDOC_KEY_FACTS_AFTER_INGEST="false",
        # A summary is seconds here; a stuck one must not hold a test for hours.
        LONGDOC_MODEL_TIME_LIMIT_S="300",
        LONGDOC_INGEST_TIME_LIMIT_S="120",
        # A killed pool child's task goes back 1 s after its death is seen, not 10 s: no result
        # can come from a SIGKILLed child (the kill tests and the poison guard's).
        LONGDOC_WORKER_LOST_WAIT_S="1",
    )
    env.update(extra)
    return env


def settings_for(env: dict[str, str]) -> Settings:
    values = {
        k.removeprefix("LONGDOC_").lower(): v for k, v in env.items() if k.startswith("LONGDOC_")
    }
    return Settings(_env_file=None, **values)


class Harness:
    """The test's side: a migrated database, sessions on it, a Celery app to queue tasks."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.settings = settings_for(env)
        upgrade(self.settings.database_url)
        self.engine = make_engine(self.settings.database_url)
        self.sessions = sessionmaker(bind=self.engine, expire_on_commit=False)
        self.app = make_celery(self.settings)

    def queue_ingest(self, path: Path, *, then_summarize: bool = True) -> int:
        content_hash = file_store.content_hash_of(path)
        stored = file_store.store_file(
            files_dir=self.settings.files_dir, content_hash=content_hash, data=path
        )
        params = {"path": str(stored), "file_name": path.name, "then_summarize": then_summarize}
        return self._submit(JobKind.INGEST, params=params)

    def queue_summary(self, document_id: int) -> int:
        return self._submit(JobKind.SUMMARIZE, document_id=document_id)

    def queue_answer(self, document_id: int, question: str) -> int:
        return self._submit(JobKind.ANSWER, document_id=document_id, params={"question": question})

    def _submit(self, kind: JobKind, **values: Any) -> int:
        """As every client queues a job (app.services.dispatch.submit_job), through this app."""
        with self.sessions() as session:
            job = dispatch.submit_job(
                settings=self.settings, session=session, kind=kind, client=self.app, **values
            )
            return job.id

    def job(self, job_id: int) -> Job:
        with self.sessions() as session:
            return jobs.get_job(session=session, job_id=job_id)

    def wait_for(self, predicate: Callable[[Session], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.sessions() as session:
                if predicate(session):
                    return
            time.sleep(0.25)
        with self.sessions() as session:
            rows = session.scalars(select(Job).order_by(Job.id)).all()
            states = [(j.id, j.kind.value, j.status.value, j.stage, j.error_code) for j in rows]
        raise AssertionError(f"timed out waiting for {what}; jobs: {states}")

    def num_summaries(self, session: Session | None = None) -> int:
        if session is not None:
            return session.scalar(select(func.count()).select_from(Summary))
        with self.sessions() as own:
            return own.scalar(select(func.count()).select_from(Summary))

    def all_jobs_finished(self, session: Session, expected: int) -> bool:
        rows = session.scalars(select(Job)).all()
        finished = [j for j in rows if j.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)]
        return len(rows) >= expected and len(finished) == len(rows)

    def close(self) -> None:
        self.engine.dispose()


def unique_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"
