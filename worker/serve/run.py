"""Starting the API: its keys and the check that no open port goes without one, its config from
the settings, and the API in a thread of a model worker (`longdoc worker --serve-port`), where
it shares the engine, and so the batches, of that worker's own model tasks."""

from __future__ import annotations

import ipaddress
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import InvalidSettings
from app.settings import Settings

if TYPE_CHECKING:  # the app imports torch (the engine): not for every `longdoc` command
    from worker.serve.app import ServeConfig
    from worker.serve.user_keys import UserKeys

logger = logging.getLogger(__name__)

_LOCAL_NAMES = ("localhost",)


def api_keys(settings: Settings, given: list[str]) -> list[str]:
    """Keys from the option, the setting (comma-separated) and the file (one a line, # comments)."""
    keys = list(given)
    keys += settings.serve_api_keys.get_secret_value().split(",")
    path: Path | None = settings.serve_api_keys_file
    if path is not None:
        try:
            lines = path.read_text().splitlines()
        except OSError as error:
            raise InvalidSettings(
                f"The API keys file {path} cannot be read ({error.strerror or error})."
            ) from None
        keys += [line for line in lines if not line.strip().startswith("#")]
    return sorted({key for key in (k.strip() for k in keys) if key})


def is_local(host: str) -> bool:
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def open_user_keys(settings: Settings) -> UserKeys | None:
    """Users' API keys from the database (`longdoc users api-key`); None without a migrated
    database. Their requests' audit rows name this server by its model."""
    from worker.serve.user_keys import UserKeys

    return UserKeys.open(settings, origin=f"serve {settings.model}")


def checked_config(
    settings: Settings, host: str, given_keys: list[str], *, has_user_keys: bool = False
) -> ServeConfig:
    """The server's config; InvalidSettings when it would listen beyond this machine keyless.
    With users' keys (has_user_keys), it may: every request then needs a key."""
    from worker.serve.app import ServeConfig

    keys = api_keys(settings, given_keys)
    if not keys and not has_user_keys and not is_local(host):
        raise InvalidSettings(
            f"`longdoc serve` listens on {host} only with an API key: give --api-key, or set "
            "LONGDOC_SERVE_API_KEYS or LONGDOC_SERVE_API_KEYS_FILE, or give users keys with "
            "`longdoc users api-key` after `longdoc db upgrade` (or listen on 127.0.0.1)."
        )
    return ServeConfig(
        model_name=settings.model,
        api_keys=frozenset(keys),
        is_key_required=not is_local(host),
        max_tokens=settings.serve_max_tokens,
        max_body_bytes=settings.serve_max_body_bytes,
        max_concurrent_per_key=settings.serve_max_concurrent_per_key,
    )


def start_in_thread(
    settings: Settings,
    config: ServeConfig,
    host: str,
    port: int,
    user_keys: UserKeys | None = None,
) -> None:
    """The API in a daemon thread of this process (a threads-pool model worker): the engine is
    built there now, the one this process's model tasks then use too."""

    def run() -> None:
        import uvicorn

        from worker.model.engine_holder import get_engine_loop
        from worker.serve.app import make_app

        try:
            loop = get_engine_loop(settings)
        except Exception as error:  # the worker goes on; its tasks will report the fault
            logger.error("the API was not started: the model failed to load (%s)", error)
            return
        # Not the main thread: uvicorn leaves the signals to the Celery worker.
        uvicorn.Server(
            uvicorn.Config(
                make_app(loop, config, user_keys), host=host, port=port, log_level="warning"
            )
        ).run()

    threading.Thread(target=run, name="longdoc-serve", daemon=True).start()
