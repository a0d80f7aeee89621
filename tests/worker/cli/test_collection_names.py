"""Collection names per owner through the command line, on SQLite and PostgreSQL: an editor
names a collection like one they may not read and is told nothing of it; an admin who reads two
of one name is refused with their ids and owners, and "#ID" picks one in every command that
takes a collection (show, grant, search, ask, rename); `collections list` shows the owners.

The world of tests/app/access_world.py: "Matter B" is hidden from edna (editor, writes A)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Collection, CollectionGrant, Job
from app.db.session import make_engine, session_factory
from app.services import audit
from app.settings import get_settings
from tests.app.access_world import World, build_world
from tests.worker.cli.test_ask import cli_runner
from worker.cli import cli


@pytest.fixture
def sessions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, migrated_url: str
) -> Iterator[sessionmaker[Session]]:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_DATABASE_URL", migrated_url)
    get_settings.cache_clear()
    engine = make_engine(migrated_url)
    yield session_factory(engine)
    engine.dispose()
    get_settings.cache_clear()


@pytest.fixture
def world(sessions) -> World:
    with sessions() as session:
        return build_world(session)


def _run(*args: str) -> tuple[int, str]:
    result = cli_runner.invoke(cli, list(args))
    return result.exit_code, " ".join(result.output.split())


def test_an_editor_names_a_collection_like_a_hidden_one(sessions, world) -> None:
    code, output = _run("--as", "edna", "collections", "create", "Matter B")
    assert code == 0, output
    with sessions() as session:
        ednas = session.query(Collection).filter_by(owner_id=world.user_ids["editor"]).one()
        assert output == f"Created collection 'Matter B' (id {ednas.id})."  # nothing of B
        hidden = session.get(Collection, world.collection_b)
        assert (hidden.name, hidden.owner_id) == ("Matter B", None)  # untouched
        assert session.get(CollectionGrant, (world.user_ids["editor"], hidden.id)) is None
        events = audit.list_events(session=session, user_name="edna")
        about = {i for e in events if e.target_kind == "collection" for i in e.target_ids}
        assert about == {ednas.id}
    code, output = _run("--as", "edna", "collections", "create", "matter b")
    assert code == 1 and "There is already a collection named 'Matter B'." in output  # hers
    code, output = _run("--as", "edna", "collections", "list")
    assert "Matter B" in output and "edna" in output and "2 collections." in output


def test_an_admin_picks_one_of_two_of_a_name_by_its_id(sessions, world) -> None:
    assert _run("--as", "edna", "collections", "create", "Matter B")[0] == 0
    with sessions() as session:
        ednas = session.query(Collection).filter_by(owner_id=world.user_ids["editor"]).one().id
    hidden = world.collection_b
    code, output = _run("collections", "show", "matter b")
    assert code == 1
    assert (
        f"2 collections you may open are named 'Matter B': #{hidden} (the admins'), "
        f"#{ednas} (edna's). Name one by its id, as #{hidden} (quoted in a shell: '#{hidden}')"
    ) in output
    code, output = _run("--as", "ada", "users", "grant", "vera", "Matter B")
    assert code == 1 and "Name one by its id" in output
    code, output = _run("collections", "show", f"#{hidden}")
    assert code == 0 and "Zeppelin Merger" in output and "holds 1 document(s)" in output
    code, output = _run("--as", "ada", "users", "grant", "vera", f"#{ednas}")
    assert code == 0 and "vera may now read 'Matter B'." in output
    with sessions() as session:
        assert session.get(CollectionGrant, (world.user_ids["viewer"], ednas)) is not None
        assert session.get(CollectionGrant, (world.user_ids["viewer"], hidden)) is None
    code, output = _run("search", "zeppelin", "--collection", f"#{hidden}", "--words-only")
    assert code == 0 and "Zeppelin Merger" in output and "1 passage found." in output
    code, output = _run("search", "zeppelin", "--collection", f"#{ednas}", "--words-only")
    assert code == 0 and "0 passages found." in output
    code, output = _run("ask", "--collection", f"#{hidden}", "Who lands?", "--no-wait")
    assert code == 0, output
    with sessions() as session:
        (job,) = session.query(Job).filter(Job.collection_id.is_not(None)).all()
        assert job.collection_id == hidden
    code, output = _run("collections", "rename", f"#{ednas}", "Matter B of edna")
    assert code == 0 and "Renamed to 'Matter B of edna'." in output
    code, output = _run("collections", "show", "Matter B")  # one of the name again
    assert code == 0 and "Zeppelin Merger" in output
    code, output = _run("collections", "list")
    assert "(admins)" in output and "edna" in output
    # edna: the hidden one's id and a missing id are refused alike.
    refused = _run("--as", "edna", "collections", "show", f"#{hidden}")
    missing = _run("--as", "edna", "collections", "show", "#999999")
    assert refused[0] == missing[0] == 1
    assert refused[1].replace(f"#{hidden}", "#ID") == missing[1].replace("#999999", "#ID")
