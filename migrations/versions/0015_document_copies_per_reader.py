"""document copies per reader: a file's content hash is no longer unique among documents

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 02:00:00

Accounts (issue 25): a user who uploads a file already stored as a document they may not read
gets a document of their own, so that an upload never tells them that the file is stored
elsewhere, nor that document's id. The index on documents.content_hash stays (finding a file
already stored), without its uniqueness. A downgrade restores the uniqueness and refuses, with
a sentence, while two documents share a file (deleting one is for a person to decide).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_documents_content_hash"


def upgrade() -> None:
    op.drop_index(INDEX, table_name="documents")
    op.create_index(INDEX, "documents", ["content_hash"], unique=False)


def downgrade() -> None:
    shared = op.get_bind().execute(
        sa.text(
            "SELECT count(*) FROM (SELECT content_hash FROM documents GROUP BY content_hash "
            "HAVING count(*) > 1) AS shared"
        )
    )
    num_shared = shared.scalar() or 0
    if num_shared:
        raise RuntimeError(
            f"{num_shared} file(s) are stored as several documents (one per reader); delete "
            "the copies you do not need (`longdoc delete ID`) before downgrading below 0015."
        )
    op.drop_index(INDEX, table_name="documents")
    op.create_index(INDEX, "documents", ["content_hash"], unique=True)
