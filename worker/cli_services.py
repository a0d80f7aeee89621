"""`longdoc worker`, `longdoc beat` and `longdoc up` (both at once, stopped cleanly on Ctrl-C).

Pool choice: prefork (the default) runs tasks in a child process. That is what lets
reject_on_worker_lost work: when the child dies mid-task (SIGKILL, the OOM killer) the parent
is still alive to put the task back on the queue. The engine is built lazily in that child on
its first model task, never in the parent. `--pool solo` runs tasks in the worker process
itself: fine for debugging, but a crash then loses the process that would requeue the task.
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

from app.cli import cli, console, error_console, exit_on_error, load_settings, open_session
from worker.celery_app import ALL_QUEUES, make_celery

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


@cli.command()
def worker(
    queues: Annotated[
        str, typer.Option(help="Comma-separated: ingest (CPU), gpu (questions), gpu_batch.")
    ] = ",".join(ALL_QUEUES),
    concurrency: Annotated[
        int, typer.Option(min=1, help="Tasks at once; keep 1 for a worker that runs the model.")
    ] = 1,
    pool: Annotated[
        str, typer.Option(help="prefork (requeues tasks of dead children) or solo.")
    ] = ("prefork"),
    loglevel: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
) -> None:
    """Run a worker for the given queues (one engine per pool process, built on first use)."""
    with exit_on_error():
        names = _check_queues(queues)
        if pool not in ("prefork", "solo"):
            raise typer.BadParameter("choose prefork or solo", param_hint="--pool")
        settings = load_settings()
        with open_session(settings):
            pass  # fails early, with a sentence, when the database is missing or not migrated
        argv = [
            "worker",
            f"--queues={','.join(names)}",
            f"--concurrency={concurrency}",
            f"--pool={pool}",
            f"--loglevel={loglevel}",
            f"--hostname=longdoc-{'-'.join(names)}@%h",
            # No peers to synchronise with: tasks, not workers, carry all the state.
            "--without-mingle",
            "--without-gossip",
        ]
        make_celery(settings).worker_main(argv)


@cli.command()
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


@cli.command()
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
        "worker": ["worker", f"--loglevel={loglevel}"],
        "beat": ["beat", f"--loglevel={loglevel}"],
    }
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


@cli.command("ui")
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
