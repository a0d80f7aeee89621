"""Batch slots first come, first served, and a wait logged once with its count; the embedded
broker hands out messages of one queue in the order they were sent; Celery's line per retry of
a job task is left out of the log."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from celery import Celery
from celery.app import trace as celery_trace
from celery.worker import strategy as celery_strategy
from sqlalchemy.exc import OperationalError

from app import broker_files
from app.services import dispatch
from app.settings import Settings
from tests.app.test_dispatch import take_message
from worker.jobs import batch_slots, poison


@pytest.fixture
def one_slot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    monkeypatch.setattr(batch_slots, "_waiting", {})
    monkeypatch.setattr(batch_slots, "_in_use", 0)
    return Settings(_env_file=None, data_dir=tmp_path / "data", model_batch_slots=1)


def _asks(settings: Settings, job_id: int) -> bool:
    with batch_slots.slot(settings, job_id) as taken:
        return taken


def test_a_freed_slot_goes_to_the_job_that_waited_longest(one_slot, caplog) -> None:
    caplog.set_level(logging.INFO, logger=batch_slots.__name__)
    with batch_slots.slot(one_slot, 5) as first:
        assert first
        # Queued later, but asking first: 7 (three times), then 6; all wait while 5 runs.
        assert [_asks(one_slot, 7) for _ in range(3)] == [False] * 3
        assert not _asks(one_slot, 6)

    # The slot is free: 7 asks again first, but 6 came first and is still waiting.
    assert not _asks(one_slot, 7)
    assert _asks(one_slot, 6)
    assert _asks(one_slot, 7)
    lines = [r.getMessage() for r in caplog.records if r.name == batch_slots.__name__]
    assert lines == [
        "job 7 waits for a batch slot (all in use or kept for older jobs)",
        "job 6 waits for a batch slot (all in use or kept for older jobs)",
        "job 6 took a batch slot after waiting once (0 s)",
        "job 7 took a batch slot after waiting 4 times (0 s)",
    ]


def test_a_waiting_job_never_seen_again_keeps_no_place(one_slot, monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(batch_slots.time, "monotonic", lambda: now[0])
    with batch_slots.slot(one_slot, 5):
        assert not _asks(one_slot, 6)  # then its task went elsewhere: it never asks again
    assert not _asks(one_slot, 7)
    now[0] += batch_slots.FORGET_WAITER_AFTER_S + 1
    assert _asks(one_slot, 7)


def test_the_embedded_broker_hands_out_one_queues_messages_first_sent_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across a change in the number of digits of the clock (9.999 s, then 10.000 s), where
    names sorted as text would put the later message first."""
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")
    clock = iter([9.999, 10.0])
    monkeypatch.setattr(broker_files, "monotonic", lambda: next(clock))
    client = dispatch.make_client(settings)
    for job_id in (1, 2):
        client.send_task(dispatch.TASK_SUMMARIZE, args=[job_id], queue=dispatch.QUEUE_GPU_BATCH)
    client.close()
    monkeypatch.undo()

    first = take_message(settings, dispatch.QUEUE_GPU_BATCH)
    second = take_message(settings, dispatch.QUEUE_GPU_BATCH)

    assert [first["body"][0], second["body"][0]] == [[1], [2]]


def test_celery_s_line_per_retry_of_a_job_task_is_left_out(caplog) -> None:
    poison.quiet_retry_lines()
    poison.quiet_retry_lines()  # once only
    caplog.set_level(logging.INFO, logger=celery_trace.__name__)
    trace_logger = logging.getLogger(celery_trace.__name__)

    for name in (dispatch.TASK_SUMMARIZE, "longdoc.scan_inbox"):
        trace_logger.info(celery_trace.LOG_RETRY, {"id": "t", "name": name, "exc": "Retry in 3.5s"})

    assert [r.getMessage() for r in caplog.records] == [
        "Task longdoc.scan_inbox[t] retry: Retry in 3.5s"
    ]
    assert trace_logger.filters.count(poison._RETRY_LINES) == 1


def test_a_job_tasks_retries_are_logged_once_then_counted_when_it_ends(caplog) -> None:
    app = Celery("retries", set_as_current=False)
    app.conf.update(task_always_eager=True)
    failures = [2]

    @app.task(
        name=dispatch.TASK_SUMMARIZE,
        base=poison.JobTask,
        bind=True,
        autoretry_for=(OperationalError,),
        default_retry_delay=0,
        max_retries=5,
    )
    def flaky(self, label: str) -> str:  # not a job id: no run counted in a database
        if failures[0]:
            failures[0] -= 1
            raise OperationalError("UPDATE jobs", {}, sqlite3.OperationalError("locked"))
        return label

    poison.quiet_retry_lines()
    caplog.set_level(logging.DEBUG)

    assert flaky.apply(args=["x"]).get() == "x"

    ours = [r for r in caplog.records if r.name == poison.__name__ and r.levelno >= logging.INFO]
    assert [r.getMessage() for r in ours] == [
        "job None: OperationalError, its task runs again (retry 1)",
        "job None: its task ended (SUCCESS) after 2 retries",
    ]
    assert not [r for r in caplog.records if "Retry in" in r.getMessage()]


def test_celery_s_received_line_for_a_task_back_from_waiting_is_left_out(
    caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch_slots, "_sent_back", {})
    batch_slots.quiet_wait_lines()
    caplog.set_level(logging.INFO, logger=celery_strategy.__name__)
    strategy_logger = logging.getLogger(celery_strategy.__name__)

    def received(task_id: str) -> None:
        strategy_logger.info(
            celery_trace.LOG_RECEIVED, {"id": task_id, "name": dispatch.TASK_SUMMARIZE}
        )

    batch_slots._note_sent_back("waiting", waiting=True)
    received("waiting")  # back from waiting: left out
    received("new")
    batch_slots._note_sent_back("waiting", waiting=False)  # it took a slot
    received("waiting")

    assert [r.getMessage() for r in caplog.records] == [
        "Task longdoc.summarize[new] received",
        "Task longdoc.summarize[waiting] received",
    ]


def test_a_waiting_summary_stores_its_state_once_not_at_every_wait(
    one_slot, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The result backend is the database: a write every few seconds per waiting summary would
    # take SQLite's one write lock for a state that did not change.
    from celery.app.trace import trace_task

    from worker import celery_app, resources

    settings = one_slot.model_copy(update={"database_url": f"sqlite:///{tmp_path / 'results.db'}"})
    monkeypatch.setattr(resources, "settings", lambda: settings)
    monkeypatch.setattr(batch_slots, "_in_use", 1)  # a summary runs: none is left
    monkeypatch.setattr(batch_slots, "_sent_back", {})
    app = Celery("waits", set_as_current=False)
    app.conf.update(celery_config := celery_app.celery_config(settings))
    assert celery_config["result_backend"].startswith("db+sqlite")
    # A name of its own (a shared task named like the real one would take its place here once
    # worker.tasks is imported), routed as the real summary task is.
    name = "tests.batch_slots.summarize"
    app.conf.task_routes = {
        **celery_config["task_routes"],
        name: celery_config["task_routes"][dispatch.TASK_SUMMARIZE],
    }

    @app.task(name=name, base=batch_slots.BatchJobTask, bind=True)
    def summarize(self, job_id: int) -> int:
        return job_id

    stored: list[str] = []
    store_result = app.backend.store_result

    def counted(task_id, result, state, *args, **kwargs):
        stored.append(state)
        return store_result(task_id, result, state, *args, **kwargs)

    monkeypatch.setattr(app.backend, "store_result", counted)
    task = app.tasks[summarize.name]
    for _ in range(3):
        trace_task(task, "task-7", [7], {}, request={"id": "task-7", "retries": 0}, app=app)

    assert stored == ["RETRY"]  # the first wait only
    messages = [take_message(settings, "gpu_batch") for _ in range(3)]
    # Each return is sent with the caller's choice: its result is stored once it runs.
    assert all(m["headers"].get("ignore_result") is False for m in messages)
    assert app.backend.get_task_meta("task-7")["status"] == "RETRY"
