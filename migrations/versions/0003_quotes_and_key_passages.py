"""quotes and support of answers; key passages of summaries

Revision ID: 0003
Revises: 0001 (the lead re-chains 0002-0005 when the issue-11 branches merge)
Create Date: 2026-12-02 10:00:00

Answers gain the sentences they rest on (quotes), how they stand against them (support), the
model's own text when the best quote replaced it, and what it stated that the document does not
hold. Summaries gain their key passages. Rows from before hold empty lists and no support.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
EMPTY_LIST = sa.text("'[]'")
SUPPORT_STATUSES = ("supported", "unchecked", "unsupported", "quoted", "no_answer")


def upgrade() -> None:
    # Batch mode: SQLite adds a CHECK constraint only by rebuilding the table (answers has no
    # other CHECK constraint a rebuild could lose); PostgreSQL gets plain ALTER TABLEs.
    with op.batch_alter_table("answers") as batch:
        batch.add_column(sa.Column("quotes", JSON, server_default=EMPTY_LIST, nullable=False))
        batch.add_column(
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
            )
        )
        batch.add_column(sa.Column("model_answer", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("unsupported_claims", JSON, server_default=EMPTY_LIST, nullable=False)
        )
    # A plain ADD COLUMN on both databases: the summaries table keeps its method CHECK.
    op.add_column(
        "summaries",
        sa.Column("key_passages", JSON, server_default=EMPTY_LIST, nullable=False),
    )


def downgrade() -> None:
    op.drop_column("summaries", "key_passages")
    with op.batch_alter_table("answers") as batch:
        batch.drop_column("unsupported_claims")
        batch.drop_column("model_answer")
        # By name first: SQLite's rebuild would otherwise keep a CHECK on a column it dropped.
        batch.drop_constraint(op.f("ck_answers_support_status"), type_="check")
        batch.drop_column("support")
        batch.drop_column("quotes")
