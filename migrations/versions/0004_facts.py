"""facts: key facts per document, and the "facts" job kind

Revision ID: 0004
Revises: 0001 (the lead re-chains 0002-0005 at merge)
Create Date: 2026-12-01 18:40:00

Written from app/db/models.py (Fact, JobKind.FACTS) and checked against autogenerate. The job
kind is a VARCHAR with a CHECK constraint (no native enum type), so adding "facts" replaces
that constraint; on SQLite batch mode rebuilds the jobs table to do so.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
JOB_KINDS_BEFORE = ("ingest", "summarize", "answer")
JOB_KINDS_AFTER = (*JOB_KINDS_BEFORE, "facts")


def _kinds_check(kinds: Sequence[str]) -> str:
    return "kind IN (" + ", ".join(f"'{kind}'" for kind in kinds) + ")"


def _replace_job_kinds(kinds: Sequence[str]) -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_job_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_jobs_job_kind"), _kinds_check(kinds))


def upgrade() -> None:
    _replace_job_kinds(JOB_KINDS_AFTER)
    op.create_table(
        "facts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("field", sa.String(length=64), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("normalized_value", sa.Text(), nullable=False),
        sa.Column("evidence", JSON, nullable=False),
        sa.Column("page", sa.Integer(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column(
            "source",
            sa.Enum(
                "model",
                "rule",
                "none",
                name="fact_source",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "confidence >= 0 AND confidence <= 1", name=op.f("ck_facts_confidence_range")
        ),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["documents.id"],
            name=op.f("fk_facts_document_id_documents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_facts_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_facts")),
        sa.UniqueConstraint("document_id", "field", name=op.f("uq_facts_document_id_field")),
    )
    op.create_index(op.f("ix_facts_job_id"), "facts", ["job_id"], unique=False)


def downgrade() -> None:
    op.drop_table("facts")
    # Facts jobs cannot stay under the old constraint; their facts went with the table.
    op.execute("DELETE FROM jobs WHERE kind = 'facts'")
    _replace_job_kinds(JOB_KINDS_BEFORE)
