"""`longdoc health`: the database, the broker and a worker's heartbeat, each in a sentence;
exit status 1 when one fails (the compose services' healthchecks run it)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from app.health import check_all
from worker.cli.common import console, error_console, exit_on_error, load_settings

commands = typer.Typer()


@commands.command("health")
def health(
    worker: Annotated[
        bool, typer.Option("--worker/--no-worker", help="Also require a worker's heartbeat.")
    ] = True,
    here: Annotated[
        bool, typer.Option("--here", help="Only a worker on this host counts (a container's own).")
    ] = False,
) -> None:
    """Check that LongDoc can work: database, broker, and a worker answering a ping."""
    with exit_on_error():
        checks = check_all(load_settings(), worker=worker, here_only=here)
    for check in checks:
        mark = "[green]ok[/green]" if check.is_ok else "[red]failed[/red]"
        (console if check.is_ok else error_console).print(
            f"{check.name}: {mark} · {escape(check.sentence)}", soft_wrap=True
        )
    failed = [check for check in checks if not check.is_ok]
    if failed:
        names = ", ".join(check.name for check in failed)
        error_console.print(f"LongDoc is not healthy: the {names} check failed.")
        raise typer.Exit(1)
    console.print("LongDoc is healthy.")
