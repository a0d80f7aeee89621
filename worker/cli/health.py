"""`longdoc health`: the database, the broker and a worker's heartbeat, each in a sentence;
with LONGDOC_LLM_BASE_URL set, the model server and its model too; exit status 1 when one
fails (the compose services' healthchecks run it)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from app.errors import AppError
from app.health import Check, check_all
from app.settings import Settings
from worker.cli.common import console, error_console, exit_on_error, load_settings
from worker.model.server_api import ServerConfig, check_server

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
        settings = load_settings()
        checks = check_all(settings, worker=worker, here_only=here)
        if settings.uses_model_server:
            checks.append(check_model_server(settings))
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


def check_model_server(settings: Settings) -> Check:
    """Does the model server of LONGDOC_LLM_BASE_URL answer, with LONGDOC_LLM_MODEL among its
    models (the key is sent, never shown)."""
    try:
        config = ServerConfig.from_settings(settings)
    except AppError as error:  # an unreadable key file
        return Check("model server", False, error.sentence)
    is_ok, sentence = check_server(config)
    return Check("model server", is_ok, sentence)
