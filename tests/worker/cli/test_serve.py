"""`longdoc serve`'s checks before it loads anything: no API key, no listening beyond this
machine; keys from the option, the setting and a file. The server itself: tests/worker/serve/."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from app.errors import InvalidSettings
from app.settings import Settings
from tests.worker import celery_support
from worker.serve.run import api_keys, checked_config, is_local, open_user_keys


def _serve(tmp_path: Path, *args: str, **values: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGDOC_")}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(celery_support.REPO), env.get("PYTHONPATH")])
    )
    env.update(LONGDOC_DATA_DIR=str(tmp_path / "data"), **values)
    return subprocess.run(
        [celery_support.LONGDOC, "serve", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_serve_refuses_to_listen_beyond_this_machine_without_a_key(tmp_path) -> None:
    refused = _serve(tmp_path, "--host", "0.0.0.0", "--port", "1")
    assert refused.returncode == 1
    assert "only with an API key" in refused.stderr and "0.0.0.0" in refused.stderr
    assert "Traceback" not in refused.stderr + refused.stdout

    missing_file = _serve(
        tmp_path,
        "--host",
        "0.0.0.0",
        LONGDOC_SERVE_API_KEYS_FILE=str(tmp_path / "missing.txt"),
    )
    assert missing_file.returncode == 1
    assert "cannot be read" in missing_file.stderr and "Traceback" not in missing_file.stderr


def test_keys_come_from_the_option_the_setting_and_a_file(tmp_path) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("# one key a line\nfile-key\n\n  spaced-key  \n")
    settings = Settings(
        _env_file=None,
        data_dir=str(tmp_path),
        serve_api_keys="env-key-1, env-key-2,",
        serve_api_keys_file=str(keys_file),
    )
    assert api_keys(settings, ["option-key"]) == [
        "env-key-1",
        "env-key-2",
        "file-key",
        "option-key",
        "spaced-key",
    ]
    assert "env-key-1" not in repr(settings)  # a secret: never in a log line of the settings
    assert api_keys(Settings(_env_file=None, data_dir=str(tmp_path)), []) == []


def test_local_hosts() -> None:
    assert all(is_local(h) for h in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"))
    assert not any(is_local(h) for h in ("0.0.0.0", "::", "10.0.0.5", "gpu-box"))


def test_users_keys_let_it_listen_beyond_this_machine_with_a_key_always_asked(tmp_path) -> None:
    settings = Settings(_env_file=None, data_dir=str(tmp_path))
    with pytest.raises(InvalidSettings, match="longdoc users api-key"):
        checked_config(settings, "0.0.0.0", [])
    config = checked_config(settings, "0.0.0.0", [], has_user_keys=True)
    assert config.is_key_required and not config.api_keys
    assert not checked_config(settings, "127.0.0.1", [], has_user_keys=True).is_key_required
    assert open_user_keys(settings) is None  # no database yet: the configured keys alone
