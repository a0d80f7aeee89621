"""`python -m ui.launch`: run the UI headless on LONGDOC_UI_PORT and print where to open it.

Streamlit's own flags: no browser opened, no usage statistics sent, the upload limit taken from
LONGDOC_MAX_UPLOAD_BYTES (Streamlit counts in MB), and no file watching (nothing to reload in
production, and fewer inotify handles).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from app.errors import InvalidSettings
from app.settings import get_settings
from ui import oidc_secrets

# The st.App that serves ui/main.py behind the upload gate (ui/asgi_app.py).
APP_SCRIPT = Path(__file__).resolve().parent / "asgi_app.py"
MIB = 1024 * 1024


def streamlit_argv(
    *, port: int, address: str, max_upload_bytes: int, secrets_file: Path | None = None
) -> list[str]:
    """Streamlit's command line; with `secrets_file` (sign-in through an identity provider,
    ui/oidc_secrets.py), Streamlit reads it after its usual secrets files."""
    argv = [
        "streamlit",
        "run",
        str(APP_SCRIPT),
        f"--server.port={port}",
        f"--server.address={address}",
        "--server.headless=true",
        "--server.fileWatcherType=none",
        f"--server.maxUploadSize={max(1, math.ceil(max_upload_bytes / MIB))}",
        "--browser.gatherUsageStats=false",
        "--client.toolbarMode=minimal",
        "--theme.base=light",
        "--theme.primaryColor=#2F5D8A",
    ]
    if secrets_file is not None:
        from streamlit import config as streamlit_config

        usual = streamlit_config.get_config_files("secrets.toml")
        argv += [f"--secrets.files={path}" for path in [*usual, str(secrets_file)]]
    return argv


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run LongDoc's web UI.")
    parser.add_argument("--port", type=int, default=None, help="default: LONGDOC_UI_PORT")
    parser.add_argument(
        "--address", default="127.0.0.1", help="0.0.0.0 to serve other machines (use a password)"
    )
    args = parser.parse_args(argv)
    settings = get_settings()
    port = args.port or settings.ui_port
    host = "localhost" if args.address in ("127.0.0.1", "0.0.0.0") else args.address
    print(f"LongDoc UI: open http://{host}:{port} in your browser.", flush=True)
    os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    # Set before numpy loads: the search query's encoder (app/query_encoder.py) multiplies a few
    # rows at a time, where BLAS threads only contend (0.2-3 s a query on a loaded 2-core
    # machine against 35-110 ms on one thread).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from streamlit.web import cli as streamlit_cli

    try:
        secrets_file = oidc_secrets.write_secrets(settings)
    except InvalidSettings as error:  # an unreadable client secret file
        sys.exit(str(error))
    sys.argv = streamlit_argv(
        port=port,
        address=args.address,
        max_upload_bytes=settings.max_upload_bytes,
        secrets_file=secrets_file,
    )
    sys.exit(streamlit_cli.main())


if __name__ == "__main__":
    main()
