"""How many summaries a model worker runs at once, so some of its threads stay free for questions.

A threads-pool worker with N threads that took N summaries would leave a question waiting in the
broker until one finished (minutes). Summaries take one of `num_model_batch_slots` slots (N - 2
by default); a summary that finds none is put back on its queue for a moment, and its thread is
free again at once. Questions and ingests never need a slot.

Waiting for a slot is not a failure: the task goes back with the same retry count (Celery's own
`retry` would spend one of the retries meant for database errors each time, and after eight
waits fail a job that never ran), and without touching its job row (no run counted, no write:
twenty waiting summaries would otherwise write to the database ten times a second).
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from typing import Any

from celery.exceptions import Retry

from app.settings import Settings
from worker import resources
from worker.jobs.poison import JobTask

# A waiting summary comes back after RETRY_AFTER_S to twice that, at random, so twenty of them
# do not all ask again in the same instant.
RETRY_AFTER_S = 2.0

_lock = threading.Lock()
_in_use = 0


@contextlib.contextmanager
def slot(settings: Settings) -> Iterator[bool]:
    """Yields whether a slot was taken (and frees it on exit)."""
    global _in_use
    with _lock:
        taken = _in_use < settings.num_model_batch_slots
        if taken:
            _in_use += 1
    try:
        yield taken
    finally:
        if taken:
            with _lock:
                _in_use -= 1


class BatchJobTask(JobTask):
    """A job task that runs only while it holds a batch slot (summaries, key facts)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with slot(resources.settings()) as has_slot:
            if not has_slot:
                raise come_back_later(self)
            return super().__call__(*args, **kwargs)


def come_back_later(task: Any) -> Retry:
    """Send the task again in a few seconds with its retry count unchanged; the Retry to raise."""
    request = task.request
    after_s = random.uniform(RETRY_AFTER_S, 2 * RETRY_AFTER_S)
    again = task.signature_from_request(request, countdown=after_s, retries=request.retries)
    again.apply_async()
    return Retry(when=after_s, sig=again)
