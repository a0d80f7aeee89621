"""Serve app/metrics.py's metrics over HTTP for Prometheus, from a worker or the UI process.

A worker with pool children (prefork) keeps its metrics in files, one set per child, under a
fresh PROMETHEUS_MULTIPROC_DIR (prometheus_client's multiprocess mode): `use_multiprocess_dir`
must run before the first metric is made, in the parent, so every child inherits it. The
worker's main process then serves the sum over its children. A single-process exporter (the
threads pool, the UI) serves the process's own registry. Every exporter also reports the depth
of each queue, asked of the broker at scrape time.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app import metrics
from app.metrics import QUEUE_DEPTH
from app.settings import Settings

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_started: dict[int, Any] = {}
_lock = threading.Lock()


def use_multiprocess_dir() -> Path:
    """A fresh, private folder for this process tree's metric files (removed at exit); set in
    the environment before any metric exists, so pool children inherit it."""
    folder = Path(tempfile.mkdtemp(prefix="longdoc-metrics-"))
    os.environ[MULTIPROC_ENV] = str(folder)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def is_multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


def mark_process_dead(pid: int) -> None:
    """A pool child ended: its live gauges leave the sum (its counters stay)."""
    if is_multiprocess():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


class QueueDepthCollector:
    """Messages waiting in each queue, asked of the broker at each scrape (none if it is down)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from app.services.dispatch import queue_lengths

        family = GaugeMetricFamily(
            QUEUE_DEPTH, "Messages waiting in each queue, as the broker says.", labels=["queue"]
        )
        for queue, length in sorted((queue_lengths(self.settings) or {}).items()):
            family.add_metric([queue], length)
        yield family

    def describe(self) -> Iterator[Any]:
        return iter(())  # collected only when scraped: the broker is not asked at registration


def registry_for(settings: Settings) -> Any:
    """What an exporter serves: the multiprocess sum or this process's metrics, and the queues."""
    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess

    if is_multiprocess():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    registry.register(QueueDepthCollector(settings))
    return registry


def start_exporter(settings: Settings, *, port: int | None = None) -> int | None:
    """Serve /metrics on `port` (default LONGDOC_METRICS_PORT) at LONGDOC_METRICS_HOST, once per
    process and port; returns the port, or None when off or the port is taken (logged: metrics
    are never a reason for a worker or the UI not to run)."""
    port = port if port is not None else settings.metrics_port
    if port is None:
        return None
    with _lock:
        if port in _started:
            return port
        from prometheus_client import start_http_server

        metrics.get()  # every series from the start, at zero, not only once first recorded
        try:
            server, _thread = start_http_server(
                port, addr=settings.metrics_host, registry=registry_for(settings)
            )
        except OSError as error:
            logger.warning("metrics not served: port %d unavailable (%s)", port, error.strerror)
            return None
        _started[port] = server
        logger.info("metrics served on %s port %d", settings.metrics_host, port)
        return port
