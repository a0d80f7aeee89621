"""The model workers' threads pool takes a cold shutdown without a traceback (worker/thread_pool.py)."""

from __future__ import annotations

from celery.concurrency import get_implementation

from worker import thread_pool


def test_the_pool_is_known_to_celery_by_its_alias_and_terminating_a_job_does_not_raise() -> None:
    pool_cls = get_implementation(thread_pool.register())
    assert pool_cls is thread_pool.TaskPool
    pool = pool_cls(limit=2)
    pool.start()
    try:
        pool.terminate_job(pid=1234)  # Celery's own raises NotImplementedError
    finally:
        pool.stop()
