"""A refusal tells nothing of what exists (accounts, issue 25): `longdoc --as NAME ...` on a
collection or document the user may not read, and on one that does not exist, answers in the
same words with the same exit status, and logs both as refused. Generated: every command below
x every role that is not an admin x (hidden, missing).

The world of tests/app/access_world.py: "Matter B" and its document `b` are hidden from edna
(editor, writes A) and vera (viewer, reads A)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from app.db.models import Role
from app.services import audit
from tests.app.access_world import NAMES, World, build_world
from tests.worker.cli import test_ask as test_cli_ask
from tests.worker.cli.test_ask import cli_runner
from worker.cli import cli

sessions = test_cli_ask.sessions  # the fixture: a migrated SQLite database, embedded broker

HIDDEN_COLLECTION = "Matter B"
MISSING_COLLECTION = "Matter Zed"
# A command's arguments, given the collection name or the document id it is about.
COLLECTION_COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "show": lambda name: ["collections", "show", name],
    "rename": lambda name: ["collections", "rename", name, "Another name"],
    "delete": lambda name: ["collections", "delete", name],
    "add to": lambda name: ["collections", "add", name, "1"],
    "remove from": lambda name: ["collections", "remove", name, "1"],
    "search in": lambda name: ["search", "zeppelin", "--collection", name, "--words-only"],
    "ask": lambda name: ["ask", "--collection", name, "Which?", "--no-wait"],
    "grant": lambda name: ["users", "grant", "vera", name],
    "revoke": lambda name: ["users", "revoke", "vera", name],
}
DOCUMENT_COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "show": lambda doc: ["show", doc, "--no-pages", "--no-passages"],
    "delete": lambda doc: ["delete", doc, "--yes"],
    "summarize": lambda doc: ["summarize", doc, "--no-wait"],
    "facts": lambda doc: ["facts", doc],
    "extract facts": lambda doc: ["facts", doc, "--run", "--no-wait"],
    "ask": lambda doc: ["ask", doc, "Who lands?", "--no-wait"],
    "embed": lambda doc: ["embed", doc],
    "add to A": lambda doc: ["collections", "add", "Matter A", doc],
    "remove from A": lambda doc: ["collections", "remove", "Matter A", doc],
}
ROLES = (Role.EDITOR, Role.VIEWER)
CASES = [("collection", c) for c in COLLECTION_COMMANDS] + [
    ("document", c) for c in DOCUMENT_COMMANDS
]
CELLS = list(itertools.product(ROLES, CASES))


@pytest.fixture
def world(sessions) -> World:
    with sessions() as session:
        return build_world(session)


def _answer(role: Role, args: list[str], target: str) -> tuple[int, str]:
    """The exit status and the output, the target's name or id written as TARGET."""
    result = cli_runner.invoke(cli, ["--as", NAMES[role], *args])
    return result.exit_code, " ".join(result.output.split()).replace(target, "TARGET")


@pytest.mark.parametrize(
    ("role", "case"), CELLS, ids=[f"{r.value}-{kind} {c}" for r, (kind, c) in CELLS]
)
def test_a_hidden_target_and_a_missing_one_are_refused_alike(sessions, world, role, case) -> None:
    kind, command = case
    if kind == "collection":
        args, hidden, missing = COLLECTION_COMMANDS[command], HIDDEN_COLLECTION, MISSING_COLLECTION
    else:
        args, hidden, missing = DOCUMENT_COMMANDS[command], str(world.b), str(world.b + 1000)
    refused = _answer(role, args(hidden), hidden)
    absent = _answer(role, args(missing), missing)
    assert refused[0] == 1, refused
    assert refused == absent
    with sessions() as session:
        events = audit.list_events(session=session, outcome=audit.REFUSED)
    assert [e.user_name for e in events] == [NAMES[role]] * 2  # both logged as refused
