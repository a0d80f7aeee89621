"""The Celery configuration: limits, routes, brokers, and the names the app's client shares with
the worker (no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings
from worker.celery_app import (
    TASK_ANSWER,
    TASK_FACTS,
    TASK_FOR_KIND,
    TASK_INGEST,
    TASK_SUMMARIZE,
    broker_redelivers,
    celery_config,
)


def settings(tmp_path: Path, **values) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **values)


def test_settings_fit_for_long_gpu_tasks(tmp_path: Path) -> None:
    config = celery_config(settings(tmp_path, model_time_limit_s=3600))

    assert config["task_acks_late"] and config["task_reject_on_worker_lost"]
    assert config["worker_prefetch_multiplier"] == 1
    assert config["worker_lost_wait"] == 10.0  # a dead pool child's task back after 10 s
    assert celery_config(settings(tmp_path, worker_lost_wait_s=1))["worker_lost_wait"] == 1
    assert config["accept_content"] == ["json"]
    assert config["task_serializer"] == config["result_serializer"] == "json"
    limits = config["task_annotations"][TASK_SUMMARIZE]
    assert limits["time_limit"] == 3600 and 0 < limits["soft_time_limit"] < 3600
    assert config["task_routes"][TASK_ANSWER] == {"queue": "gpu"}
    assert config["task_routes"][TASK_SUMMARIZE] == {"queue": "gpu_batch"}
    assert config["task_routes"][TASK_INGEST] == {"queue": "ingest"}


def test_every_job_task_has_its_time_limit_from_settings(tmp_path: Path) -> None:
    config = celery_config(settings(tmp_path, model_time_limit_s=3600, ingest_time_limit_s=900))

    limits = config["task_annotations"]
    assert set(TASK_FOR_KIND.values()) <= set(limits)
    assert limits[TASK_FACTS] == limits[TASK_SUMMARIZE] == limits[TASK_ANSWER]
    assert limits[TASK_FACTS]["time_limit"] == 3600
    assert limits[TASK_INGEST]["time_limit"] == 900


def test_embedded_default_is_the_filesystem_broker_with_results_in_the_database(
    tmp_path: Path,
) -> None:
    current = settings(tmp_path)
    config = celery_config(current)

    assert config["broker_url"] == "filesystem://"
    assert config["result_backend"] == f"db+{current.database_url}"
    options = config["broker_transport_options"]
    assert Path(options["data_folder_in"]).is_dir()
    # Messages taken from the queue are renamed within the broker's folder (atomic), not moved
    # to /tmp, which may be another filesystem (a copy that two workers could both make).
    assert Path(options["processed_folder"]).parent == Path(options["data_folder_in"]).parent
    assert not broker_redelivers(current)
    assert not config["worker_send_task_events"]


def test_redis_gets_a_visibility_timeout_longer_than_the_longest_task(tmp_path: Path) -> None:
    current = settings(tmp_path, broker_url="redis://redis:6379/0", model_time_limit_s=7200)
    options = celery_config(current)["broker_transport_options"]

    assert options["visibility_timeout"] > 7200
    assert options["queue_order_strategy"] == "priority"  # gpu (questions) before gpu_batch
    assert broker_redelivers(current)


def test_the_apps_client_uses_the_same_task_and_queue_names() -> None:
    # app/services/dispatch.py (the UI's sender) mirrors these names without importing worker/.
    dispatch = pytest.importorskip("app.services.dispatch")
    from worker import celery_app

    assert dispatch.TASK_FOR_KIND == celery_app.TASK_FOR_KIND
    assert set(dispatch.ALL_QUEUES) == set(celery_app.ALL_QUEUES)
    for name in celery_app.TASK_FOR_KIND.values():
        assert (
            getattr(dispatch, "QUEUE_FOR_TASK", celery_app.QUEUE_FOR_TASK)[name]
            == (celery_app.QUEUE_FOR_TASK[name])
        )
