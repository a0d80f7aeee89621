"""answers may be partly supported

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 09:00:00

The support check reads meaning now (pipelines/answer/assess.py): an answer is supported,
partly supported or not supported by its quotes. `support` of answers and collection answers
gains "partly_supported"; what such an answer lacks is a sentence in its stats
("support_missing"). Only the CHECK constraint changes: dropped and made again with the new
list (batch mode: SQLite rebuilds the table, PostgreSQL alters it). A downgrade stores
"unchecked" for a partly supported answer, the old status that claims least: its rows stay.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = ("supported", "unchecked", "unsupported", "quoted", "no_answer")
NEW_STATUSES = ("supported", "partly_supported", *OLD_STATUSES[1:])
TABLES = ("answers", "collection_answers")


def _support_check(table: str, statuses: Sequence[str]) -> None:
    name = op.f(f"ck_{table}_support_status")
    listed = ", ".join(f"'{status}'" for status in statuses)
    with op.batch_alter_table(table) as batch:
        batch.drop_constraint(name, type_="check")
        batch.create_check_constraint(name, f"support IN ({listed})")


def upgrade() -> None:
    for table in TABLES:
        _support_check(table, NEW_STATUSES)


def downgrade() -> None:
    for table in TABLES:
        op.execute(
            sa.text(f"UPDATE {table} SET support = 'unchecked' WHERE support = 'partly_supported'")
        )
        _support_check(table, OLD_STATUSES)
