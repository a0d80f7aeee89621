"""a summary's lead: its first lines, from the document's key facts

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 19:40:00

Summaries gain `lead`: one line per identifying key fact (a court, the parties, a date, the
disposition, the governing law), each with the quotes the fact rests on, in the rows
`sentence_support` holds (pipelines.summary.lead). Kept apart from the model's text: the facts
job replaces it when it runs again. A plain ADD COLUMN on both databases; summaries from before
hold an empty list and are shown as before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
EMPTY_LIST = sa.text("'[]'")


def upgrade() -> None:
    op.add_column("summaries", sa.Column("lead", JSON, server_default=EMPTY_LIST, nullable=False))


def downgrade() -> None:
    op.drop_column("summaries", "lead")
