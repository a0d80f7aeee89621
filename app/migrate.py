"""Schema migrations, run from code (`longdoc db upgrade`), against migrations/ at the repo root."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from app.db.session import database_unavailable, sqlite_file
from app.errors import DatabaseNotMigrated

# Found from the package, not the working directory: app/ and migrations/ are siblings in the
# repo, which an editable install (`pip install -e .`) keeps as they are.
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


# Full-text search objects that migration 0007 creates in SQL and the models leave out: SQLite's
# FTS5 table (with its shadow tables) and PostgreSQL's generated column and its GIN index.
SEARCH_TABLE_PREFIX = "passages_fts"
SEARCH_COLUMN = "search_vector"
SEARCH_INDEX = "ix_passages_search_vector"


def is_app_object(name: str | None, type_: str, parent_names: dict) -> bool:
    """Alembic's include_name filter: Celery's result tables share the database but are Celery's
    to create, so autogenerate must neither drop nor compare them; nor the search objects."""
    if name is None:
        return True
    if type_ == "table":
        return not (name.startswith("celery_") or name.startswith(SEARCH_TABLE_PREFIX))
    if type_ == "column":
        return name != SEARCH_COLUMN
    if type_ == "index":
        return name != SEARCH_INDEX
    return True


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Config values go through configparser interpolation: a URL-encoded password has "%".
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema up to `revision`, creating a SQLite file's folder if needed."""
    path = sqlite_file(database_url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        command.upgrade(alembic_config(database_url), revision)
    except DBAPIError as error:
        raise database_unavailable(database_url, error) from error


def downgrade(database_url: str, revision: str = "base") -> None:
    """Undo migrations down to `revision`; "base" drops every table. Tests use this."""
    try:
        command.downgrade(alembic_config(database_url), revision)
    except DBAPIError as error:
        raise database_unavailable(database_url, error) from error


def head_revision() -> str:
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head is not None, f"no migrations in {MIGRATIONS_DIR}"
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for a database no migration has touched."""
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except DBAPIError as error:
        raise database_unavailable(engine.url.render_as_string(False), error) from error


def require_head(engine: Engine) -> None:
    """Raise DatabaseNotMigrated unless the schema is at the newest migration."""
    current, head = current_revision(engine), head_revision()
    if current != head:
        state = "has no tables yet" if current is None else f"is at revision {current}"
        raise DatabaseNotMigrated(
            f"The database {state}, but this version of LongDoc needs revision {head}; "
            "run `longdoc db upgrade`."
        )
