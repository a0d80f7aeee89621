"""Round-trip latency of the embedded broker candidates: kombu's filesystem transport and its
SQLAlchemy transport on SQLite, against Redis for reference.

For each broker: migrate a fresh SQLite database, start `longdoc worker --queues=ingest`, send
`longdoc.summarize_missing` (a near no-op with nothing to summarize) N times one after another
and time send -> result (result read from the database backend, polled every 20 ms). Prints a
Markdown table. Redelivery after SIGKILL is tested in tests/worker/test_celery_*.py.

    .venv/bin/python bench/embedded_broker.py --num-tasks 30
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.migrate import upgrade
from app.settings import Settings
from worker.celery_app import TASK_SUMMARIZE_MISSING, make_celery

LONGDOC = str(Path(sys.executable).parent / "longdoc")


def measure(name: str, broker_url: str, folder: Path, num_tasks: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGDOC_")}
    env.update(
        LONGDOC_DATA_DIR=str(folder / "data"),
        LONGDOC_DATABASE_URL=f"sqlite:///{folder / 'longdoc.db'}",
        LONGDOC_BROKER_URL=broker_url,
        LONGDOC_INBOX_SCAN_ENABLED="false",
        LONGDOC_AUTO_SUMMARIZE_ENABLED="false",
    )
    settings = Settings(
        _env_file=None,
        data_dir=folder / "data",
        database_url=env["LONGDOC_DATABASE_URL"],
        broker_url=broker_url,
    )
    upgrade(settings.database_url)
    log = (folder / f"{name}.log").open("wb")
    worker = subprocess.Popen(
        [LONGDOC, "worker", "--queues=ingest"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while b" ready." not in (folder / f"{name}.log").read_bytes():
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError(f"{name}: worker did not start")
            time.sleep(0.1)
        app = make_celery(settings)
        seconds = []
        for _ in range(num_tasks):
            started = time.perf_counter()
            result = app.send_task(TASK_SUMMARIZE_MISSING, queue="ingest")
            result.get(timeout=60, interval=0.02)
            seconds.append(time.perf_counter() - started)
        return {
            "broker": name,
            "median_ms": statistics.median(seconds) * 1000,
            "p90_ms": sorted(seconds)[int(0.9 * (len(seconds) - 1))] * 1000,
            "max_ms": max(seconds) * 1000,
        }
    finally:
        os.killpg(worker.pid, signal.SIGQUIT)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-tasks", type=int, default=30)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        brokers = {
            "filesystem": "",
            "sqlalchemy (SQLite)": f"sqla+sqlite:///{root / 'sqlalchemy' / 'broker.sqlite'}",
            "redis (reference)": args.redis_url,
        }
        for name, url in brokers.items():
            folder = root / name.split()[0]
            folder.mkdir(exist_ok=True)
            try:
                rows.append(measure(name.split()[0], url, folder, args.num_tasks))
                rows[-1]["broker"] = name
            except Exception as error:  # a broker that is absent is reported, not fatal
                print(f"{name}: {type(error).__name__}: {error}", file=sys.stderr)
    print(f"| broker | median ms | p90 ms | max ms |  ({args.num_tasks} tasks, one at a time)")
    print("|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['broker']} | {row['median_ms']:.0f} | {row['p90_ms']:.0f} "
            f"| {row['max_ms']:.0f} |"
        )


if __name__ == "__main__":
    main()
