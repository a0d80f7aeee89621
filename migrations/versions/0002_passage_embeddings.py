"""passage embeddings: the sentence-embedding vectors of each passage and the model that made them

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 18:10:00

Both columns are nullable: documents ingested before this migration have no vectors until the
first answer or summary job computes them (worker/model/vector_store.py). The value is the vectors of
the passage's sentences, float16, row after row; written and read by the worker only.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("passages") as batch:
        batch.add_column(sa.Column("embedding", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("embedding_model", sa.String(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("passages") as batch:
        batch.drop_column("embedding_model")
        batch.drop_column("embedding")
