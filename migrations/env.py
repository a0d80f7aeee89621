"""Alembic environment: metadata from app.db.models; URL from the Config, else from settings."""

from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import JSON

from app.db.models import Base, UTCDateTime
from app.db.session import make_engine
from app.migrate import is_app_object

config = context.config
# Only the alembic command line reads alembic.ini's logging setup; app/migrate.py passes no file,
# so running migrations from the CLI or a test leaves the caller's logging alone.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _database_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from app.settings import get_settings

    return get_settings().database_url


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    # Migration files import no app code: app column types render as what the database stores.
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    # Every JSON column is app.db.models.JsonType; alembic's own rendering of the variant
    # refers to an unimported `Text`.
    if type_ == "type" and isinstance(obj, JSON):
        autogen_context.imports.add("from sqlalchemy.dialects import postgresql")
        return 'sa.JSON().with_variant(postgresql.JSONB(), "postgresql")'
    return False


def run_migrations_offline() -> None:
    context.configure(
        url=_database_url(),
        target_metadata=target_metadata,
        render_item=_render_item,
        include_name=is_app_object,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # Foreign keys off: batch mode rebuilds SQLite tables, and a DROP TABLE with enforcement on
    # would cascade-delete child rows.
    engine = make_engine(_database_url(), sqlite_foreign_keys=False)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                render_item=_render_item,
                include_name=is_app_object,
                compare_type=True,
                # Both databases roll back a failed upgrade whole; SQLite does too because
                # make_engine emits BEGIN itself (see app/db/session.py).
                transactional_ddl=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
