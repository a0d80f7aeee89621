"""Users' API keys (migration 0014) on SQLite and PostgreSQL: a database of 0013 with a user
migrates, the user gets a key; a downgrade drops the keys and keeps the user."""

from __future__ import annotations

import re

from sqlalchemy import inspect, text

from app import migrate
from app.db.models import Role
from app.db.session import make_engine, session_factory
from app.services import accounts, api_keys
from app.services.access import local_admin


def test_an_0013_database_migrates_and_its_users_get_keys(database_url: str) -> None:
    migrate.upgrade(database_url, "0013")
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            accounts.add_user(
                session=session,
                actor=local_admin(),
                name="edna",
                role=Role.EDITOR,
                password="a long password",
            )
            session.commit()
        assert "api_keys" not in inspect(engine).get_table_names()
        migrate.upgrade(database_url)
        if engine.dialect.name == "sqlite":
            with engine.connect() as connection:
                sql = connection.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = 'api_keys'")
                ).scalar()
            assert re.search(r"\bid INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT", sql)
        with session_factory(engine)() as session:
            made = api_keys.create_key(session=session, actor=local_admin(), name="edna")
            session.commit()
            assert api_keys.user_for_key(session=session, secret=made.secret).name == "edna"
        migrate.downgrade(database_url, "0013")
        assert "api_keys" not in inspect(engine).get_table_names()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM users")).scalar() == 1
    finally:
        engine.dispose()
