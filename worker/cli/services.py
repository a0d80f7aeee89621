"""`longdoc worker`, `longdoc beat` and `longdoc up` (both at once, stopped cleanly on Ctrl-C).

Pool choice:
- model workers (queues gpu, gpu_batch) run Celery's threads pool: every task thread shares the
  process's one engine, so the model calls of all running tasks are batched together and the
  weights are on the GPU once (worker/model/engine_holder.py). Summaries take at most
  LONGDOC_MODEL_BATCH_SLOTS threads, so questions always find one (worker/jobs/batch_slots.py); the
  threads pool has no Celery time limits, so each model call waits at most the task's limit.
  A worker that dies loses its running tasks' acknowledgements, so the broker (or the restart
  sweep of worker/jobs/recovery.py) hands them out again; jobs are idempotent.
- the ingest worker runs prefork: when a child dies mid-task (SIGKILL, the OOM killer) the parent
  is still alive to put the task back on the queue (reject_on_worker_lost).
- `--pool solo` runs tasks in the worker process itself: for debugging.
- `--serve-port` runs the OpenAI-compatible API (worker/serve/) in a thread of a threads-pool model
  worker: its requests are batched with the worker's own tasks in the same engine.
`longdoc up` runs one worker of each kind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Annotated

import typer

from app import metrics_export
from app.settings import Settings
from worker import thread_pool
from worker.celery_app import ALL_QUEUES, GPU_QUEUES, QUEUE_INGEST, make_celery
from worker.cli.common import console, error_console, exit_on_error, load_settings, open_session

commands = typer.Typer()

MODEL_QUEUES = GPU_QUEUES

# Ctrl-C: a warm shutdown (finish the running task) for this long, then a cold one.
STOP_GRACE_S = 10.0
_CHILD_MAIN = "from worker.cli import main; main()"


def _check_queues(queues: str) -> list[str]:
    names = [q.strip() for q in queues.split(",") if q.strip()]
    unknown = sorted(set(names) - set(ALL_QUEUES))
    if not names or unknown:
        raise typer.BadParameter(
            f"choose from {', '.join(ALL_QUEUES)} (comma-separated)", param_hint="--queues"
        )
    return names


@commands.command()
def worker(
    queues: Annotated[
        str, typer.Option(help="Comma-separated: ingest (CPU), gpu (questions), gpu_batch.")
    ] = ",".join(ALL_QUEUES),
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1, help="Tasks at once (default: LONGDOC_MODEL_WORKER_CONCURRENCY for threads, 1)."
        ),
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option(help="threads (model queues: one shared engine), prefork or solo."),
    ] = None,
    loglevel: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, help="Serve Prometheus metrics here (LONGDOC_METRICS_PORT)."
        ),
    ] = None,
    serve_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Also serve the engine's OpenAI-compatible API here (as `longdoc serve`).",
        ),
    ] = None,
    serve_host: Annotated[
        str, typer.Option(help="The API's address; beyond this machine only with a key.")
    ] = "127.0.0.1",
) -> None:
    """Run a worker for the given queues (one engine per pool process, built on first use)."""
    with exit_on_error():
        names = _check_queues(queues)
        runs_model = bool(set(names) & set(MODEL_QUEUES))
        pool = pool or ("threads" if runs_model else "prefork")
        if pool not in ("threads", "prefork", "solo"):
            raise typer.BadParameter("choose threads, prefork or solo", param_hint="--pool")
        settings = load_settings()
        if concurrency is None:
            concurrency = settings.model_worker_concurrency if pool == "threads" else 1
        with open_session(settings):
            pass  # fails early, with a sentence, when the database is missing or not migrated
        argv = [
            "worker",
            f"--queues={','.join(names)}",
            f"--concurrency={concurrency}",
            # Ours for "threads": Celery's, but a cold shutdown prints no traceback.
            f"--pool={thread_pool.register() if pool == 'threads' else pool}",
            f"--loglevel={loglevel}",
            f"--hostname=longdoc-{'-'.join(names)}@%h",
            # No peers to synchronise with: tasks, not workers, carry all the state.
            "--without-mingle",
            "--without-gossip",
        ]
        if serve_port is not None:
            _serve_api(settings, serve_host, serve_port, pool=pool, runs_model=runs_model)
        _serve_metrics(settings, metrics_port, pool)
        make_celery(settings).worker_main(argv)


def _serve_api(settings: Settings, host: str, port: int, *, pool: str, runs_model: bool) -> None:
    from worker.serve.run import checked_config, open_user_keys, start_in_thread

    if not runs_model or pool != "threads":
        raise typer.BadParameter(
            "only a model worker (queues gpu or gpu_batch) on the threads pool serves the API",
            param_hint="--serve-port",
        )
    user_keys = open_user_keys(settings)
    config = checked_config(settings, host, [], has_user_keys=user_keys is not None)
    start_in_thread(settings, config, host, port, user_keys)
    console.print(f"OpenAI-compatible API on http://{host}:{port}/v1")


def _serve_metrics(settings: Settings, port: int | None, pool: str) -> None:
    """Metrics from this worker's main process; a prefork pool's children write theirs to files
    of a folder made before any metric exists, which the main process sums (app/metrics_export)."""
    port = port if port is not None else settings.metrics_port
    if port is None:
        return
    if pool == "prefork":
        metrics_export.use_multiprocess_dir()
    if metrics_export.start_exporter(settings, port=port) is not None:
        console.print(f"Metrics on http://0.0.0.0:{port}/metrics")


@commands.command()
def beat(
    loglevel: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
) -> None:
    """Run the scheduler: inbox scans and summaries of new documents (see LONGDOC_INBOX_*)."""
    with exit_on_error():
        settings = load_settings()
        with open_session(settings):
            pass
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        app = make_celery(settings)
        if not app.conf.beat_schedule:
            console.print("Both scheduled jobs are switched off; beat has nothing to do.")
        app.start(["beat", f"--loglevel={loglevel}"])


@commands.command()
def up(
    loglevel: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
    ui: Annotated[bool, typer.Option("--ui/--no-ui", help="Also serve the web UI.")] = False,
) -> None:
    """Run a worker for every queue and the scheduler (and the UI), until Ctrl-C stops them."""
    with exit_on_error():
        settings = load_settings()
        with open_session(settings):
            pass
        settings.inbox_dir.mkdir(parents=True, exist_ok=True)
    where = "the embedded broker" if settings.is_embedded_broker else "the configured broker"
    console.print(
        f"LongDoc is running on {where}; drop PDFs into {settings.inbox_dir}. Ctrl-C stops it."
    )
    commands = {
        "worker": ["worker", f"--queues={','.join(MODEL_QUEUES)}", f"--loglevel={loglevel}"],
        "ingest-worker": ["worker", f"--queues={QUEUE_INGEST}", f"--loglevel={loglevel}"],
        "beat": ["beat", f"--loglevel={loglevel}"],
    }
    ui_env = None
    if settings.metrics_port is not None:  # one port each: the worker, the ingest worker, the UI
        commands["worker"].append(f"--metrics-port={settings.metrics_port}")
        commands["ingest-worker"].append(f"--metrics-port={settings.metrics_port + 1}")
        ui_env = {**os.environ, "LONGDOC_METRICS_PORT": str(settings.metrics_port + 2)}
    # Own sessions: Ctrl-C reaches only this process, which then stops the children in order.
    children = {
        name: subprocess.Popen([sys.executable, "-c", _CHILD_MAIN, *args], start_new_session=True)
        for name, args in commands.items()
    }
    if ui:
        # Launched, not imported: the UI is its own Streamlit process that reaches the workers
        # only through the database and the broker.
        children["ui"] = subprocess.Popen(
            [sys.executable, "-m", "ui.launch", "--port", str(settings.ui_port)],
            start_new_session=True,
            env=ui_env,
        )
    stopping = {"requested": 0}

    def request_stop(_signum: int, _frame: object) -> None:
        stopping["requested"] += 1

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    exit_code = 0
    try:
        while not stopping["requested"]:
            ended = [name for name, child in children.items() if child.poll() is not None]
            if ended:
                error_console.print(f"The {ended[0]} stopped unexpectedly; stopping the rest.")
                exit_code = 1
                break
            time.sleep(0.2)
        console.print("Stopping: the worker finishes or hands back its task…")
        stop_children(children, grace_s=STOP_GRACE_S, is_hurried=lambda: stopping["requested"] > 1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    console.print("Stopped.")
    raise typer.Exit(exit_code)


def stop_children(
    children: dict[str, subprocess.Popen], *, grace_s: float, is_hurried=lambda: False
) -> None:
    """SIGTERM (warm shutdown), then after grace_s SIGQUIT (cold: unfinished tasks go back to
    the queue), then SIGKILL. A second Ctrl-C (is_hurried) skips the wait."""
    for step, sig in ((grace_s, signal.SIGTERM), (grace_s, signal.SIGQUIT), (5.0, signal.SIGKILL)):
        for child in children.values():
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, sig)
        deadline = time.monotonic() + step
        while time.monotonic() < deadline and not is_hurried():
            if all(child.poll() is not None for child in children.values()):
                return
            time.sleep(0.1)
    for child in children.values():
        child.wait(timeout=5)


@commands.command("ui")
def ui_command(
    host: Annotated[
        str, typer.Option(help="Address to listen on; 0.0.0.0 serves other machines.")
    ] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Default: LONGDOC_UI_PORT.")] = None,
) -> None:
    """Serve the web UI (Streamlit), in its own process."""
    argv = [sys.executable, "-m", "ui.launch", f"--address={host}"]
    if port is not None:
        argv.append(f"--port={port}")
    raise typer.Exit(subprocess.call(argv))
