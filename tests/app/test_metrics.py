"""app/metrics.py: what each record function moves, the names a scrape can show, and the
multiprocess mode of a prefork worker (children's counters summed by the parent's exporter)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

from prometheus_client import REGISTRY

from app import metrics
from app.settings import Settings
from tests.worker.redis_server import spare_port

REPO = Path(__file__).resolve().parents[2]


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_model_request_moves_its_histograms_counters_and_gauges() -> None:
    before = {
        "prefill": _value("longdoc_prefill_seconds_count"),
        "ttft": _value("longdoc_time_to_first_token_seconds_count"),
        "speed": _value("longdoc_decode_tokens_per_second_count"),
        "cached": _value("longdoc_prompt_tokens_total", cached="true"),
        "computed": _value("longdoc_prompt_tokens_total", cached="false"),
        "cpu": _value("longdoc_engine_fallbacks_total", kind="cpu"),
    }
    metrics.record_model_request(
        {
            "prefill_seconds": 0.4,
            "decode_seconds": 2.0,
            "num_decode_tokens": 40,
            "decode_tokens_per_second": 20.0,
            "time_to_first_token_seconds": 0.5,
            "num_prompt_tokens": 100,
            "num_cached_tokens": 64,
            "num_kv_blocks_used": 7,
            "num_kv_blocks_free": 93,
            "fallbacks": [{"kind": "cpu", "detail": None}],
        }
    )

    assert _value("longdoc_prefill_seconds_count") == before["prefill"] + 1
    assert _value("longdoc_time_to_first_token_seconds_count") == before["ttft"] + 1
    assert _value("longdoc_decode_tokens_per_second_count") == before["speed"] + 1
    assert _value("longdoc_prompt_tokens_total", cached="true") == before["cached"] + 64
    assert _value("longdoc_prompt_tokens_total", cached="false") == before["computed"] + 36
    assert _value("longdoc_engine_fallbacks_total", kind="cpu") == before["cpu"] + 1
    assert (_value("longdoc_kv_cache_blocks_used"), _value("longdoc_kv_cache_blocks_free")) == (
        7,
        93,
    )


def test_jobs_are_counted_by_kind_and_status_with_their_duration() -> None:
    queued = _value("longdoc_jobs_total", kind="answer", status="queued")
    failed = _value("longdoc_jobs_total", kind="answer", status="failed")
    durations = _value("longdoc_job_duration_seconds_count", kind="answer", status="failed")

    metrics.record_job_queued("answer")
    metrics.record_job_ended("answer", "failed", 3.5)

    assert _value("longdoc_jobs_total", kind="answer", status="queued") == queued + 1
    assert _value("longdoc_jobs_total", kind="answer", status="failed") == failed + 1
    labels = {"kind": "answer", "status": "failed"}
    assert _value("longdoc_job_duration_seconds_count", **labels) == durations + 1


def test_exposed_names_are_what_a_scrape_shows() -> None:
    from prometheus_client import generate_latest

    metrics.get()
    scraped = {
        line.split("{")[0].split(" ")[0]
        for line in generate_latest(REGISTRY).decode().splitlines()
        if line.startswith("longdoc_")
    }
    assert scraped <= metrics.exposed_names()
    assert {"longdoc_ocr_pages_total", "longdoc_redactions_found_total"} <= scraped
    assert metrics.QUEUE_DEPTH in metrics.exposed_names()


def test_a_prefork_workers_children_are_summed_by_its_exporter(tmp_path: Path) -> None:
    """The parent chooses multiprocess mode, forks three children that each count a job, and
    serves the sum; the broker is down, so the queue depth is simply absent."""
    port = spare_port()
    script = textwrap.dedent(
        f"""
        import os, sys, time, urllib.request
        from app import metrics_export
        metrics_export.use_multiprocess_dir()
        from app import metrics
        from app.settings import Settings
        settings = Settings(_env_file=None, data_dir={str(tmp_path)!r},
                            broker_url="redis://127.0.0.1:1/0")
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                metrics.record_job_ended("ingest", "succeeded", 1.0)
                os._exit(0)
            os.waitpid(pid, 0)
            metrics_export.mark_process_dead(pid)
        assert metrics_export.start_exporter(settings, port={port}) == {port}
        url = "http://127.0.0.1:{port}/metrics"
        sys.stdout.write(urllib.request.urlopen(url, timeout=30).read().decode())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert 'longdoc_jobs_total{kind="ingest",status="succeeded"} 3.0' in lines
    assert 'longdoc_job_duration_seconds_count{kind="ingest",status="succeeded"} 3.0' in lines


def test_the_exporter_serves_the_queue_depth_of_the_embedded_broker(tmp_path: Path) -> None:
    from app import metrics_export

    port = spare_port()
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", metrics_port=port)

    assert metrics_export.start_exporter(settings) == port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    # This machine only, like the UI: the socket is bound to the loopback address.
    assert metrics_export._started[port].server_address[0] == "127.0.0.1"

    assert 'longdoc_queue_depth{queue="ingest"} 0.0' in text
    assert "longdoc_generated_tokens_total" in text


def test_a_taken_port_is_logged_not_raised(tmp_path: Path, caplog) -> None:
    import socket

    from app import metrics_export

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = Settings(_env_file=None, data_dir=tmp_path / "data", metrics_port=port)
        assert metrics_export.start_exporter(settings) is None
    assert "metrics not served" in caplog.text
