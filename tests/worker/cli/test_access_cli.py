"""The access rules through the command line, `longdoc --as NAME ...`, on SQLite with the
embedded broker: every role x command cell allowed or refused (generated from the rules below),
each refusal logged; the leak tests (search, key-facts export, a collection question answered
by the worker with the echo model); `longdoc users` and `longdoc audit`."""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Callable

import pytest

from app.db.models import Role
from app.services import audit
from tests.app.access_world import NAMES, ONLY_IN_A, ONLY_IN_B, PASSWORD, ROLES, World, build_world
from tests.worker.cli import test_ask as test_cli_ask
from tests.worker.cli.test_ask import WAIT_S, cli_runner
from tests.worker.cli.test_collections import _answer_worker
from worker.cli import cli

sessions = test_cli_ask.sessions  # the fixture: a migrated SQLite database, embedded broker

ALL = frozenset(ROLES)
WRITERS = frozenset({Role.ADMIN, Role.EDITOR})
ADMIN = frozenset({Role.ADMIN})

# command -> (its arguments given the world, the roles allowed)
Args = Callable[[World], list[str]]
COMMANDS: dict[str, tuple[Args, frozenset[Role]]] = {
    "show doc in A": (lambda w: ["show", str(w.a), "--no-pages", "--no-passages"], ALL),
    "show doc in B": (lambda w: ["show", str(w.b), "--no-pages", "--no-passages"], ADMIN),
    "show editor's own doc": (lambda w: ["show", str(w.own), "--no-pages"], WRITERS),
    "show doc in no collection": (lambda w: ["show", str(w.loose), "--no-pages"], ADMIN),
    "summarize doc in A": (lambda w: ["summarize", str(w.a), "--no-wait"], WRITERS),
    "ask doc in A": (lambda w: ["ask", str(w.a), "Who paints?", "--no-wait"], ALL),
    "ask doc in B": (lambda w: ["ask", str(w.b), "Who lands?", "--no-wait"], ADMIN),
    "facts of doc in B": (lambda w: ["facts", str(w.b)], ADMIN),
    "delete doc in B": (lambda w: ["delete", str(w.b), "--yes"], ADMIN),
    "search B": (
        lambda w: ["search", "zeppelin", "--collection", "Matter B", "--words-only"],
        ADMIN,
    ),
    "show collection B": (lambda w: ["collections", "show", "Matter B"], ADMIN),
    "add B's doc to A": (lambda w: ["collections", "add", "Matter A", str(w.b)], ADMIN),
    "rename A": (lambda w: ["collections", "rename", "Matter A", "Matter A2"], WRITERS),
    "create a collection": (lambda w: ["collections", "create", "Matter C"], WRITERS),
    "ask collection B": (
        lambda w: ["ask", "--collection", "Matter B", "Which?", "--no-wait"],
        ADMIN,
    ),
    "list users": (lambda w: ["users", "list"], ADMIN),
    "disable a user": (lambda w: ["users", "disable", "vera"], ADMIN),
    "read the audit log": (lambda w: ["audit"], ADMIN),
}
CELLS = list(itertools.product(ROLES, COMMANDS))


def _run(*args: str, stdin: str | None = None):
    result = cli_runner.invoke(cli, list(args), input=stdin)
    return result, " ".join(result.output.split())


@pytest.fixture
def world(sessions) -> World:
    with sessions() as session:
        return build_world(session)


def _events(sessions, **filters) -> list:
    with sessions() as session:
        return audit.list_events(session=session, **filters)


@pytest.mark.parametrize(("role", "command"), CELLS, ids=[f"{r.value}-{c}" for r, c in CELLS])
def test_every_role_and_command(sessions, world, role, command) -> None:
    args, allowed = COMMANDS[command]
    result, output = _run("--as", NAMES[role], *args(world))
    refused = _events(sessions, outcome=audit.REFUSED)
    if role in allowed:
        assert result.exit_code == 0, output
        assert not refused
    else:
        assert result.exit_code == 1, output
        assert re.search(r"may not|but not|that you may open", output), output
        (event,) = refused
        assert event.user_name == NAMES[role] and event.origin == "cli"


def test_without_as_the_cli_is_the_local_admin_and_unknown_names_are_refused(
    sessions, world
) -> None:
    result, output = _run("show", str(world.loose), "--no-pages", "--no-passages")
    assert result.exit_code == 0 and "Loose Memo" in output
    (event,) = _events(sessions, user_name="local admin")
    assert (event.action, event.target_ids) == ("view", [world.loose])
    result, output = _run("--as", "mallory", "docs")
    assert result.exit_code == 1 and "There is no user named 'mallory'" in output


def test_a_viewer_of_a_never_sees_b_from_the_cli(sessions, world, tmp_path) -> None:
    result, output = _run("--as", "vera", "search", ONLY_IN_B, "--words-only")
    assert result.exit_code == 0 and "0 passages found." in output and "Zeppelin" not in output
    result, output = _run("--as", "vera", "search", "zeppelin", "--any", "--words-only")
    assert "0 passages found." in output
    result, output = _run("--as", "vera", "search", ONLY_IN_A, "--words-only")
    assert "Orchard Lease" in output and "1 passage found." in output
    result, output = _run("--as", "vera", "docs")
    assert "Orchard Lease" in output and "Zeppelin" not in output and "1 document." in output
    path = tmp_path / "facts.csv"
    result, output = _run("--as", "vera", "facts", "--export", str(path))
    assert result.exit_code == 0 and "1 document(s)" in output
    rows = list(csv.DictReader(path.open()))
    assert [int(row["document_id"]) for row in rows] == [world.a]
    # Jobs: an admin's question about b is not in vera's list (its stage may name the file).
    assert _run("ask", str(world.b), "Who lands?", "--no-wait")[0].exit_code == 0
    assert _run("--as", "vera", "jobs")[1] == "No jobs yet."
    assert "answer" in _run("jobs")[1]
    missing = world.loose + 100
    refused = _run("--as", "vera", "show", str(world.b))[1].replace(str(world.b), "N")
    absent = _run("--as", "vera", "show", str(missing))[1].replace(str(missing), "N")
    assert refused == absent  # the same sentence: b's existence is not told


def test_a_collection_question_on_a_never_cites_b(sessions, world) -> None:
    thread = _answer_worker(sessions)
    result, output = _run("--as", "vera", "ask", "--collection", "Matter A", ONLY_IN_B)
    thread.join(WAIT_S)
    assert result.exit_code == 0, output
    assert "Zeppelin" not in output and "Reykjavik" not in output
    (asked,) = [e for e in _events(sessions, user_name="vera") if e.action == "ask"]
    assert asked.target_ids == [world.collection_a]
    assert asked.details == {"question_chars": len(ONLY_IN_B)}


def test_users_commands_and_the_audit_export(sessions, world, tmp_path) -> None:
    result, output = _run(
        "users", "add", "newbie", "--role", "editor", "--password-stdin", stdin=PASSWORD + "\n"
    )
    assert result.exit_code == 0 and "Added newbie (editor)." in output
    result, output = _run("users", "add", "shorty", "--password-stdin", stdin="short\n")
    assert result.exit_code == 1 and "at least 8 characters" in output
    assert _run("users", "grant", "newbie", "Matter B", "--write")[0].exit_code == 0
    result, output = _run("users", "list")
    assert "newbie" in output and "Matter B (write)" in output and "4 users." in output
    assert "Zeppelin" in _run("--as", "newbie", "docs")[1]
    assert "no longer has access" in _run("users", "revoke", "newbie", "Matter B")[1]
    assert "Zeppelin" not in _run("--as", "newbie", "docs")[1]
    result, output = _run(
        "users", "reset-password", "newbie", "--password-stdin", stdin="another long one\n"
    )
    assert result.exit_code == 0 and "sessions have ended" in output
    assert _run("users", "disable", "newbie")[0].exit_code == 0
    result, output = _run("--as", "newbie", "docs")
    assert result.exit_code == 1 and "disabled" in output
    assert _run("users", "delete", "newbie")[0].exit_code == 0
    path = tmp_path / "audit.csv"
    result, output = _run("audit", "--export", str(path), "--since", "2000-01-01")
    assert result.exit_code == 0
    rows = list(csv.DictReader(path.open()))
    actions = [row["action"] for row in rows if row["user_name"] == "local admin"]
    assert actions[:4] == ["user_add", "grant", "revoke", "user_reset_password"]
    assert "user_delete" in actions
    assert any(row["user_name"] == "newbie" and row["action"] == "view" for row in rows) is False
    text = path.read_text().lower()
    assert "zeppelin" not in text and PASSWORD not in text
    result, output = _run("audit", "--user", "newbie")
    assert result.exit_code == 0
    assert json.dumps(output)  # printable
    assert _run("audit", "--prune")[1].startswith("Pruned 0 row(s)")
