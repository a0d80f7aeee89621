"""ids are never reused: SQLite tables rebuilt with AUTOINCREMENT

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 19:30:00

Without AUTOINCREMENT, SQLite hands out max(id) + 1: deleting the newest document (or job, or
collection) freed its id for the next one, and a task still running for the deleted one saved
its result under the ids of the new one. Every table with an `id` is rebuilt with
AUTOINCREMENT (batch mode, recreate="always": rows, indexes, foreign keys and CHECK
constraints are copied as they are); SQLite then keeps the largest id ever given in
sqlite_sequence and never gives it again. An id freed before this migration may still be given
once more: nothing remembers it.

Rebuilding `passages` drops its full-text triggers (migration 0007): they are made again and the
index rebuilt. PostgreSQL's serial columns take ids from sequences, which never go back: nothing
to do there. A downgrade rebuilds the tables without AUTOINCREMENT.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = (
    "documents",
    "pages",
    "redactions",
    "passages",
    "jobs",
    "summaries",
    "answers",
    "facts",
    "collections",
    "collection_answers",
)

# Migration 0007's triggers on passages, which a rebuild of the table drops.
SEARCH_TRIGGERS_DROP = (
    "DROP TRIGGER IF EXISTS passages_fts_update",
    "DROP TRIGGER IF EXISTS passages_fts_delete",
    "DROP TRIGGER IF EXISTS passages_fts_insert",
)
SEARCH_TRIGGERS = (
    "CREATE TRIGGER passages_fts_insert AFTER INSERT ON passages BEGIN "
    "INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER passages_fts_delete AFTER DELETE ON passages BEGIN "
    "INSERT INTO passages_fts(passages_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER passages_fts_update AFTER UPDATE OF text ON passages BEGIN "
    "INSERT INTO passages_fts(passages_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text); END",
    "INSERT INTO passages_fts(passages_fts) VALUES ('rebuild')",
)


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in SEARCH_TRIGGERS_DROP:
        op.execute(statement)
    for table in TABLES:
        with op.batch_alter_table(
            table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
        ):
            pass
    for statement in SEARCH_TRIGGERS:
        op.execute(statement)


def upgrade() -> None:
    _rebuild(autoincrement=True)


def downgrade() -> None:
    _rebuild(autoincrement=False)
