"""How many summaries a model worker runs at once, so some of its threads stay free for questions.

A threads-pool worker with N threads that took N summaries would leave a question waiting in the
broker until one finished (minutes). Summaries take one of `num_model_batch_slots` slots (N - 2
by default); a summary that finds none is put back on its queue for a moment, and its thread is
free again at once. Questions and ingests never need a slot.

Waiting for a slot is not a failure: the task goes back with the same retry count (Celery's own
`retry` would spend one of the retries meant for database errors each time, and after eight
waits fail a job that never ran), and without touching its job row (no run counted, no write:
twenty waiting summaries would otherwise write to the database ten times a second); its state
in the result backend is stored at the first wait only, not again every few seconds.

First come, first served: a freed slot goes to the job that has waited longest (the smallest
job id among those waiting), not to whichever summary happens to ask next, so a contract
uploaded first is summarized first. A wait is logged once, and its count when the slot is taken.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from celery.app.task import get_actual_ignore_result
from celery.app.trace import LOG_RECEIVED
from celery.exceptions import Retry
from celery.worker import strategy as celery_strategy

from app.settings import Settings
from worker import resources
from worker.jobs.poison import JobTask, job_id_of

logger = logging.getLogger(__name__)

# A waiting summary comes back after RETRY_AFTER_S to twice that, at random, so twenty of them
# do not all ask again in the same instant. A freed slot stays idle until the oldest waiter asks
# again: at 2 s (2-4 s) a one-slot embedded worker idled 2-4 s between summaries of 1.6 s each,
# at 0.5 s (0.5-1 s) about 1 s; twenty waiting summaries then send about thirty messages a
# second, which neither broker minds (only the first wait writes to the database).
RETRY_AFTER_S = 0.5
# A waiting job not seen again for this long is forgotten (its task went to another worker, or
# its job was deleted): it holds no place in the line any more. Long enough for a busy machine's
# broker to bring a waiter back late.
FORGET_WAITER_AFTER_S = 16.0
WAITING = "waiting for a batch slot"

_lock = threading.Lock()
_in_use = 0


@dataclass
class _Waiter:
    first_s: float
    last_s: float
    num_waits: int = 0


# The jobs of this process waiting for a slot, by job id: ids are given in the order jobs were
# queued, so the smallest has waited longest.
_waiting: dict[int, _Waiter] = {}


@contextlib.contextmanager
def slot(settings: Settings, job_id: int | None = None) -> Iterator[bool]:
    """Yields whether a slot was taken (and frees it on exit). First come, first served: a job
    takes a slot only where one is left after one for each older job (smaller id) still waiting,
    so one queued later never overtakes it."""
    global _in_use
    waited, num_waits = None, 0
    with _lock:
        now = time.monotonic()
        for stale in [k for k, w in _waiting.items() if now - w.last_s > FORGET_WAITER_AFTER_S]:
            del _waiting[stale]
        older = 0 if job_id is None else sum(1 for waiting in _waiting if waiting < job_id)
        taken = _in_use + older < settings.num_model_batch_slots
        if taken:
            _in_use += 1
            waited = _waiting.pop(job_id, None) if job_id is not None else None
        elif job_id is not None:
            waiter = _waiting.setdefault(job_id, _Waiter(now, now))
            waiter.last_s, waiter.num_waits = now, waiter.num_waits + 1
            num_waits = waiter.num_waits
    if waited is not None:
        times = "once" if waited.num_waits == 1 else f"{waited.num_waits} times"
        logger.info(
            "job %s took a batch slot after waiting %s (%.0f s)",
            job_id,
            times,
            now - waited.first_s,
        )
    elif num_waits == 1:
        logger.info("job %s waits for a batch slot (all in use or kept for older jobs)", job_id)
    try:
        yield taken
    finally:
        if taken:
            with _lock:
                _in_use -= 1


# Task ids of this process's tasks sent back to wait for a slot, and when: Celery's "Task ...
# received" line for each return is left out (_NoWaitReceivedLines), a line every few seconds
# per waiting summary otherwise.
_sent_back: dict[str, float] = {}


class _NoWaitReceivedLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.msg != LOG_RECEIVED or not isinstance(args, dict):
            return True
        with _lock:
            return args.get("id") not in _sent_back


_RECEIVED_LINES = _NoWaitReceivedLines()


def quiet_wait_lines() -> None:
    """Install the filter on Celery's "received" log (once; the worker's tasks module calls it)."""
    strategy_logger = logging.getLogger(celery_strategy.__name__)
    if _RECEIVED_LINES not in strategy_logger.filters:
        strategy_logger.addFilter(_RECEIVED_LINES)


def _note_sent_back(task_id: str | None, *, waiting: bool) -> None:
    now = time.monotonic()
    with _lock:
        for stale in [k for k, t in _sent_back.items() if now - t > FORGET_WAITER_AFTER_S]:
            del _sent_back[stale]
        if task_id is None:
            return
        if waiting:
            _sent_back[task_id] = now
        else:
            _sent_back.pop(task_id, None)


class BatchJobTask(JobTask):
    """A job task that runs only while it holds a batch slot (summaries, key facts)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        job_id = job_id_of(args, kwargs)
        with slot(resources.settings(), job_id) as has_slot:
            _note_sent_back(self.request.id, waiting=not has_slot)
            if not has_slot:
                raise come_back_later(self, is_first_wait=_num_waits(job_id) <= 1)
            return super().__call__(*args, **kwargs)


def _num_waits(job_id: int | None) -> int:
    with _lock:
        waiter = _waiting.get(job_id) if job_id is not None else None
        return waiter.num_waits if waiter is not None else 1


def come_back_later(task: Any, *, is_first_wait: bool = True) -> Retry:
    """Send the task again in a few seconds with its retry count unchanged; the Retry to raise
    (Celery's own line for it is left out: worker/jobs/poison.py; `slot` logs the wait once).

    Only the first wait stores the task's state (RETRY) in the result backend, the database:
    later waits change nothing there, and a write every few seconds per waiting summary would
    take SQLite's one write lock for nothing. The task sent again keeps the caller's choice."""
    request = task.request
    ignore_result = get_actual_ignore_result(task, request)
    after_s = random.uniform(RETRY_AFTER_S, 2 * RETRY_AFTER_S)
    again = task.signature_from_request(
        request, countdown=after_s, retries=request.retries, ignore_result=ignore_result
    )
    again.apply_async()
    if not is_first_wait:
        request.ignore_result = True  # this attempt's Retry: not stored again
    return Retry(WAITING, when=after_s, sig=again)
