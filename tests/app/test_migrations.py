from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from app import migrate
from app.db.models import Base
from app.db.session import make_engine
from app.errors import DatabaseNotMigrated

APP_TABLES = {
    "documents",
    "pages",
    "passages",
    "jobs",
    "summaries",
    "answers",
    "facts",
    "collections",
    "collection_documents",
    "collection_answers",
    "redactions",
    "users",
    "collection_grants",
    "audit_events",
    "api_keys",
}


def _not_search(name: str | None, type_: str, parent_names: dict) -> bool:
    """Hides only the full-text search objects (migration 0007), not Celery's tables."""
    is_celery = type_ == "table" and name is not None and name.startswith("celery_")
    return is_celery or migrate.is_app_object(name, type_, parent_names)


def _differences(engine: Engine) -> list:
    with engine.connect() as connection:
        opts = {"compare_type": True, "include_name": _not_search}
        context = MigrationContext.configure(connection, opts=opts)
        return compare_metadata(context, Base.metadata)


def _app_tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) & APP_TABLES


def test_migrations_build_exactly_the_models(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        assert _differences(engine), "an empty database must differ from the models"
        migrate.upgrade(database_url)
        assert _differences(engine) == []
        assert migrate.current_revision(engine) == migrate.head_revision()
        migrate.require_head(engine)
        migrate.upgrade(database_url)  # a second upgrade changes nothing
        assert _differences(engine) == []
    finally:
        engine.dispose()


def test_downgrade_to_base_then_upgrade_again(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        migrate.upgrade(database_url)
        migrate.downgrade(database_url, "base")
        assert _app_tables(engine) == set()
        assert migrate.current_revision(engine) is None
        migrate.upgrade(database_url)
        assert _app_tables(engine) == APP_TABLES
        assert _differences(engine) == []
    finally:
        engine.dispose()


def test_require_head_refuses_an_unmigrated_database(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    try:
        with pytest.raises(DatabaseNotMigrated, match="longdoc db upgrade"):
            migrate.require_head(engine)
    finally:
        engine.dispose()


def test_upgrade_works_from_any_folder_and_creates_the_sqlite_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'new' / 'folder' / 'longdoc.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        assert _app_tables(engine) == APP_TABLES
    finally:
        engine.dispose()


def test_sqlite_connections_enforce_foreign_keys_in_wal_mode(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    finally:
        engine.dispose()


def test_celery_result_tables_are_left_to_celery(sqlite_url: str) -> None:
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE celery_taskmeta (id INTEGER PRIMARY KEY)")
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "include_name": migrate.is_app_object}
            )
            assert compare_metadata(context, Base.metadata) == []
        assert _differences(engine)  # without the filter autogenerate would drop the table
    finally:
        engine.dispose()


def test_sqlite_tables_never_reuse_ids_exactly_as_the_models_say(sqlite_url: str) -> None:
    """compare_metadata does not compare AUTOINCREMENT (a table option): every table the models
    mark sqlite_autoincrement has it after the migrations, and no other."""
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT name, sql FROM sqlite_master")
            migrated = {name: "AUTOINCREMENT" in (sql or "") for name, sql in rows}
        modelled = {
            table.name: bool(table.dialect_options["sqlite"]["autoincrement"])
            for table in Base.metadata.sorted_tables
        }
        assert sum(modelled.values()) >= 10
        assert {name: migrated[name] for name in modelled} == modelled
    finally:
        engine.dispose()
