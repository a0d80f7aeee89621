"""collections, questions across them, and full-text search of passages

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 22:00:00

Tables written from app/db/models.py (Collection, CollectionDocument, CollectionAnswer,
Job.collection_id) and checked against autogenerate. Cascades: deleting a collection deletes its
links, its answers and its question jobs, never a document; deleting a document deletes its links.

Full-text search is the database's own, kept in step by the database itself, so every write path
(ingest, a later re-split, a document's deletion and its ON DELETE CASCADE) is covered:
- SQLite: an FTS5 table `passages_fts` over passages.text (external content: the text is stored
  once, in passages; rowid = passages.id), with the porter stemmer, and three triggers on
  passages (insert, delete, update of text). FK cascades fire the delete trigger.
- PostgreSQL: a stored generated column `passages.search_vector` =
  to_tsvector('english', text), with a GIN index.
Neither is in the models (app.migrate.is_app_object hides them from autogenerate). A later
SQLite batch migration that rebuilds `passages` drops its triggers: it must re-create them
(create_search_objects below) and rebuild the index.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
SUPPORT_STATUSES = ("supported", "unchecked", "unsupported", "quoted", "no_answer")

SQLITE_SEARCH = (
    "CREATE VIRTUAL TABLE passages_fts USING fts5(text, content='passages', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER passages_fts_insert AFTER INSERT ON passages BEGIN "
    "INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER passages_fts_delete AFTER DELETE ON passages BEGIN "
    "INSERT INTO passages_fts(passages_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER passages_fts_update AFTER UPDATE OF text ON passages BEGIN "
    "INSERT INTO passages_fts(passages_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text); END",
    # The passages stored before this migration.
    "INSERT INTO passages_fts(passages_fts) VALUES ('rebuild')",
)
SQLITE_SEARCH_DROP = (
    "DROP TRIGGER IF EXISTS passages_fts_update",
    "DROP TRIGGER IF EXISTS passages_fts_delete",
    "DROP TRIGGER IF EXISTS passages_fts_insert",
    "DROP TABLE IF EXISTS passages_fts",
)
POSTGRES_SEARCH = (
    "ALTER TABLE passages ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX ix_passages_search_vector ON passages USING gin (search_vector)",
)
POSTGRES_SEARCH_DROP = (
    "DROP INDEX IF EXISTS ix_passages_search_vector",
    "ALTER TABLE passages DROP COLUMN IF EXISTS search_vector",
)


def create_search_objects() -> None:
    is_sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in SQLITE_SEARCH if is_sqlite else POSTGRES_SEARCH:
        op.execute(statement)


def drop_search_objects() -> None:
    is_sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in SQLITE_SEARCH_DROP if is_sqlite else POSTGRES_SEARCH_DROP:
        op.execute(statement)


def upgrade() -> None:
    op.create_table(
        "collections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_collections")),
        sa.UniqueConstraint("name", name=op.f("uq_collections_name")),
    )
    op.create_table(
        "collection_documents",
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["collection_id"],
            ["collections.id"],
            name=op.f("fk_collection_documents_collection_id_collections"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["documents.id"],
            name=op.f("fk_collection_documents_document_id_documents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "collection_id", "document_id", name=op.f("pk_collection_documents")
        ),
    )
    op.create_index(
        op.f("ix_collection_documents_document_id"),
        "collection_documents",
        ["document_id"],
        unique=False,
    )
    op.create_table(
        "collection_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("citations", JSON, nullable=False),
        sa.Column("quotes", JSON, nullable=False),
        sa.Column("rows", JSON, nullable=False),
        sa.Column("document_ids", JSON, nullable=False),
        sa.Column(
            "support",
            sa.Enum(
                *SUPPORT_STATUSES,
                name="support_status",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=True,
        ),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stats", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["collection_id"],
            ["collections.id"],
            name=op.f("fk_collection_answers_collection_id_collections"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_collection_answers_job_id_jobs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_collection_answers")),
        sa.UniqueConstraint("job_id", name=op.f("uq_collection_answers_job_id")),
    )
    op.create_index(
        op.f("ix_collection_answers_collection_id"),
        "collection_answers",
        ["collection_id"],
        unique=False,
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("collection_id", sa.Integer(), nullable=True))
        batch.create_index(batch.f("ix_jobs_collection_id"), ["collection_id"], unique=False)
        batch.create_foreign_key(
            batch.f("fk_jobs_collection_id_collections"),
            "collections",
            ["collection_id"],
            ["id"],
            ondelete="CASCADE",
        )
    create_search_objects()


def downgrade() -> None:
    drop_search_objects()
    # Question jobs about a collection have no document; they go with their collection.
    op.execute("DELETE FROM jobs WHERE collection_id IS NOT NULL")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(batch.f("fk_jobs_collection_id_collections"), type_="foreignkey")
        batch.drop_index(batch.f("ix_jobs_collection_id"))
        batch.drop_column("collection_id")
    op.drop_index(op.f("ix_collection_answers_collection_id"), table_name="collection_answers")
    op.drop_table("collection_answers")
    op.drop_index(op.f("ix_collection_documents_document_id"), table_name="collection_documents")
    op.drop_table("collection_documents")
    op.drop_table("collections")
