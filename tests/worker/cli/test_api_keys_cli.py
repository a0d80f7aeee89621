"""`longdoc users api-key / api-keys / revoke-key` on SQLite: a key printed once, listed by its
prefix only, revoked; admins only; audit rows of ids."""

from __future__ import annotations

import re

from app.services import api_keys, audit
from tests.app.access_world import build_world
from tests.worker.cli import test_ask as test_cli_ask
from tests.worker.cli.test_ask import cli_runner
from worker.cli import cli

sessions = test_cli_ask.sessions  # the fixture: a migrated SQLite database


def _run(*args: str):
    result = cli_runner.invoke(cli, list(args))
    return result, " ".join(result.output.split())


def test_a_key_is_printed_once_listed_by_prefix_and_revoked(sessions) -> None:
    with sessions() as session:
        build_world(session)
    result, output = _run("users", "api-key", "edna")
    assert result.exit_code == 0, output
    secret = result.output.splitlines()[0]
    prefix = re.fullmatch(r"(ldk_[0-9a-f]{8})_\S{43,}", secret).group(1)
    assert f"API key {prefix} made for edna; it will not be shown again" in output
    with sessions() as session:
        assert api_keys.user_for_key(session=session, secret=secret).name == "edna"

    result, output = _run("users", "api-keys")
    assert result.exit_code == 0 and prefix in output and "edna" in output
    assert secret not in result.output and "active" in output and "1 API key." in output
    assert "0 API keys." in _run("users", "api-keys", "vera")[1]

    result, output = _run("--as", "edna", "users", "api-key", "edna")
    assert result.exit_code == 1 and "ldk_" not in output
    assert _run("--as", "edna", "users", "revoke-key", prefix)[0].exit_code == 1

    result, output = _run("users", "revoke-key", prefix)
    assert result.exit_code == 0 and f"Revoked the API key {prefix}." in output
    assert "was revoked already" in _run("users", "revoke-key", prefix)[1]
    result, output = _run("users", "revoke-key", "ldk_00000000")
    assert result.exit_code == 1 and "no API key 'ldk_00000000'" in output
    assert "revoked" in _run("users", "api-keys", "edna")[1]
    with sessions() as session:
        assert api_keys.user_for_key(session=session, secret=secret) is None
        events = [e for e in audit.list_events(session=session) if e.target_kind == "api_key"]
    assert [(e.action, e.outcome, e.user_name) for e in events] == [
        ("api_key_create", "ok", "local admin"),
        ("api_key_revoke", "ok", "local admin"),
    ]
    assert events[0].target_ids == events[1].target_ids
