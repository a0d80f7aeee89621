"""Users' API keys in the server (worker/serve/app.py with worker/serve/user_keys.py), on a tiny
random model and a migrated SQLite database, in process: a user's key answers and leaves one
audit row of counts per request; a revoked key and a disabled user's key get the 401; a server
started without keys asks for one once a user has a key."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy.orm import Session, sessionmaker
from starlette.testclient import TestClient

from app import migrate
from app.db.models import ApiKey, Role
from app.db.session import make_engine, session_factory
from app.services import accounts, api_keys, audit
from app.services.access import local_admin
from engine.engine_loop import EngineLoop
from tests.engine.conftest import save_tiny_model, tiny_engine
from worker.serve.app import ServeConfig, make_app
from worker.serve.user_keys import UserKeys

MODEL = "tiny"
MACHINE_KEY = "machine-key"
PROMPT = "The tenant pays rent."
UNAUTHORIZED = "The API key is missing or wrong"
ADMIN = local_admin()


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineLoop]:
    folder = tmp_path_factory.mktemp("tiny-llama")
    save_tiny_model(folder, "llama")
    running = EngineLoop(tiny_engine(folder, chunk_size=64))
    yield running
    running.close()


@dataclass
class Database:
    url: str
    sessions: sessionmaker[Session]


@pytest.fixture
def database(sqlite_url: str) -> Iterator[Database]:
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    sessions = session_factory(engine)
    with sessions() as session:
        for name in ("edna", "vera"):
            accounts.add_user(
                session=session, actor=ADMIN, name=name, role=Role.EDITOR, password="long enough"
            )
        session.commit()
    yield Database(sqlite_url, sessions)
    engine.dispose()


@dataclass(frozen=True)
class Key:
    secret: str
    prefix: str
    id: int


def _key(database: Database, name: str) -> Key:
    with database.sessions() as session:
        made = api_keys.create_key(session=session, actor=ADMIN, name=name)
        key = Key(made.secret, made.key.prefix, made.key.id)
        session.commit()
        return key


def _complete(client: TestClient, key: str | None, **extra) -> object:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 3, "ignore_eos": True} | extra
    return client.post("/v1/completions", json=body, headers=headers)


def test_users_keys_work_beside_the_configured_ones_until_revoked_or_disabled(
    loop: EngineLoop, database: Database
) -> None:
    edna, vera = _key(database, "edna"), _key(database, "vera")
    user_keys = UserKeys(make_engine(database.url), origin=f"serve {MODEL}")
    config = ServeConfig(model_name=MODEL, api_keys=frozenset({MACHINE_KEY}))
    client = TestClient(make_app(loop, config, user_keys))

    whole = _complete(client, edna.secret)
    assert whole.status_code == 200, whole.text
    assert whole.json()["usage"]["completion_tokens"] == 3
    num_prompt = whole.json()["usage"]["prompt_tokens"]
    streamed = _complete(client, edna.secret, stream=True)
    assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")
    assert client.get("/v1/models", headers={"Authorization": f"Bearer {vera.secret}"}).is_success
    assert _complete(client, MACHINE_KEY).status_code == 200  # no user: no row

    with database.sessions() as session:
        api_keys.revoke_key(session=session, actor=ADMIN, prefix=edna.prefix)
        accounts.set_disabled(session=session, actor=ADMIN, name="vera")
        session.commit()
    for key in (edna.secret, vera.secret, edna.prefix, None):
        refused = _complete(client, key)
        assert refused.status_code == 401 and UNAUTHORIZED in refused.json()["error"]["message"]
    user_keys.close()  # writes the queued audit rows

    with database.sessions() as session:
        rows = [e for e in audit.list_events(session=session) if e.action == "api_request"]
        used = session.get(ApiKey, edna.id).last_used_at
    assert [(e.user_name, e.outcome, e.target_ids) for e in rows] == [
        ("edna", "ok", [edna.id]),
        ("edna", "ok", [edna.id]),
        ("vera", "ok", [vera.id]),
    ]
    counts = {"prompt_tokens": num_prompt, "completion_tokens": 3}
    assert [e.details for e in rows] == [
        counts,
        counts,
        {"prompt_tokens": 0, "completion_tokens": 0},
    ]
    assert all(e.origin == f"serve {MODEL}" for e in rows) and used is not None
    assert not any(PROMPT in repr(vars(e)) for e in rows)  # counts, never text


def test_a_server_without_keys_asks_for_one_once_a_user_has_one(
    loop: EngineLoop, database: Database
) -> None:
    user_keys = UserKeys(make_engine(database.url), origin=f"serve {MODEL}")
    client = TestClient(make_app(loop, ServeConfig(model_name=MODEL), user_keys))
    assert _complete(client, None).status_code == 200  # this machine only, nobody has a key
    edna = _key(database, "edna")
    assert _complete(client, None).status_code == 401
    assert _complete(client, "not-a-key").status_code == 401
    assert _complete(client, edna.secret).status_code == 200
    # Listening beyond this machine, a request always needs a key, even when no user has one.
    with database.sessions() as session:
        api_keys.revoke_key(session=session, actor=ADMIN, prefix=edna.prefix)
        session.commit()
    assert _complete(client, None).status_code == 200
    strict = TestClient(
        make_app(loop, ServeConfig(model_name=MODEL, is_key_required=True), user_keys)
    )
    assert _complete(strict, None).status_code == 401
    user_keys.close()
