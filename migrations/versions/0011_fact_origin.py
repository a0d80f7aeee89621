"""a key fact's origin and its table: where its value stands, and a value of several rows

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 15:30:00

Facts gain `origin`, where the value was read, for a person ("caption, p. 1", "section 2
DOSAGE AND ADMINISTRATION, p. 3", "clause 12.1, p. 9"), and `value_table`, the rows of a value
that has several parts (a label's doses per indication and population, each row with its page
and document characters). Plain ADD COLUMNs on both databases; facts from before hold "" and
[] and are shown as before until their document's facts job runs again.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
EMPTY_LIST = sa.text("'[]'")


def upgrade() -> None:
    op.add_column(
        "facts", sa.Column("origin", sa.Text(), server_default=sa.text("''"), nullable=False)
    )
    op.add_column(
        "facts", sa.Column("value_table", JSON, server_default=EMPTY_LIST, nullable=False)
    )


def downgrade() -> None:
    op.drop_column("facts", "value_table")
    op.drop_column("facts", "origin")
