"""Celery's threads pool for the model workers, able to take a cold shutdown.

A cold shutdown (a second Ctrl-C, or `longdoc up`'s SIGQUIT after its grace period) asks the pool
to terminate each running task. Celery's threads pool cannot (a thread cannot be stopped from
outside) and raises NotImplementedError, which the worker prints as a traceback in the middle of
stopping. Nothing is lost either way: the task's message was not acknowledged (acks_late), the
worker gives it back to the broker as it exits, and the job runs again on the next start
(worker/jobs/recovery.py). This pool says so in the log instead of raising.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.concurrency import ALIASES
from celery.concurrency.thread import TaskPool as CeleryThreadPool

logger = logging.getLogger(__name__)

ALIAS = "longdoc-threads"


class TaskPool(CeleryThreadPool):
    def terminate_job(self, pid: Any, signal: Any = None) -> None:
        logger.info(
            "cold shutdown: a running task's thread cannot be stopped; its task goes back to "
            "the queue when the worker exits"
        )


def register() -> str:
    """Make the pool known to Celery's --pool option; its name there."""
    ALIASES[ALIAS] = f"{__name__}:TaskPool"
    return ALIAS
