"""every sentence of a summary with its quotes and how it stands against them

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 06:30:00

Summaries gain `sentence_support`: each sentence of the model's summary with its status
("supported", "unsupported", "no_evidence"), the document sentences it rests on (quotes, as an
answer's) and the claims found nowhere in the document (pipelines.summary.support). A plain ADD
COLUMN on both databases; summaries from before hold an empty list and are shown as written.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
EMPTY_LIST = sa.text("'[]'")


def upgrade() -> None:
    op.add_column(
        "summaries",
        sa.Column("sentence_support", JSON, server_default=EMPTY_LIST, nullable=False),
    )


def downgrade() -> None:
    op.drop_column("summaries", "sentence_support")
