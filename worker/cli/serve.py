"""`longdoc serve`: our engine behind the OpenAI-compatible API, for any tool that speaks it
(worker/serve/app.py). Without an API key it listens on this machine only."""

from __future__ import annotations

from typing import Annotated

import typer

from app.errors import InvalidSettings
from worker.cli.common import console, exit_on_error, load_settings
from worker.serve.run import checked_config, open_user_keys

commands = typer.Typer()


@commands.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on; beyond this machine only with a key.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    api_key: Annotated[
        list[str] | None,
        typer.Option(
            "--api-key",
            help="A key clients must send (repeatable; or LONGDOC_SERVE_API_KEYS / _FILE).",
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Serve the model over the OpenAI-compatible API (/v1/chat/completions, /v1/completions,
    /v1/models, /health, /metrics), batched with LongDoc's own model work."""
    with exit_on_error():
        settings = load_settings()
        user_keys = open_user_keys(settings)
        config = checked_config(settings, host, api_key or [], has_user_keys=user_keys is not None)
        import uvicorn

        from worker.model.engine_holder import get_engine_loop
        from worker.model.source import ModelNotFoundError
        from worker.serve.app import make_app

        console.print(f"Loading the model {settings.model} ...")
        try:
            loop = get_engine_loop(settings)
        except ModelNotFoundError as error:
            raise InvalidSettings(error.message) from None
        if config.api_keys or config.is_key_required:
            keys = "API key required"
        elif user_keys is not None:
            keys = "no API key needed until a user has one; this machine only"
        else:
            keys = "no API key: this machine only"
        users = "; users' keys accepted" if user_keys is not None else ""
        console.print(f"Serving {settings.model} on http://{host}:{port}/v1 ({keys}{users}).")
    try:
        uvicorn.run(
            make_app(loop, config, user_keys), host=host, port=port, log_level=log_level.lower()
        )
    finally:
        if user_keys is not None:
            user_keys.close()
