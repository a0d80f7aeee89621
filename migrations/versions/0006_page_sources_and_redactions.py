"""pages: where their text came from (text layer or OCR); documents: OCR and redaction counts;
redactions: the boxes that hide text still in the file

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 22:00:00

Additive only. pages.source is "text_layer" for every page stored before (they all came from the
text layer: OCR did not exist), pages.ocr_confidence NULL; documents.num_ocr_pages and
num_redactions 0 and is_hidden_text_kept false (no document was checked: the counts say "none
found", which is what LongDoc knew). A redaction row holds a box and a count of characters,
never the text.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (no table rebuild on SQLite): nullable, or a default.
    op.add_column(
        "pages",
        sa.Column("source", sa.String(length=16), nullable=False, server_default="text_layer"),
    )
    op.add_column("pages", sa.Column("ocr_confidence", sa.Float(), nullable=True))
    op.add_column(
        "documents", sa.Column("num_ocr_pages", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column(
        "documents", sa.Column("num_redactions", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column(
        "documents",
        sa.Column(
            "is_hidden_text_kept", sa.Boolean(), nullable=False, server_default=sa.text("false")
        ),
    )
    op.create_table(
        "redactions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("page", sa.Integer(), nullable=False),
        sa.Column("left", sa.Float(), nullable=False),
        sa.Column("bottom", sa.Float(), nullable=False),
        sa.Column("right", sa.Float(), nullable=False),
        sa.Column("top", sa.Float(), nullable=False),
        sa.Column("num_chars", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["documents.id"],
            name=op.f("fk_redactions_document_id_documents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_redactions")),
    )
    op.create_index(op.f("ix_redactions_document_id"), "redactions", ["document_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_redactions_document_id"), table_name="redactions")
    op.drop_table("redactions")
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("is_hidden_text_kept")
        batch.drop_column("num_redactions")
        batch.drop_column("num_ocr_pages")
    with op.batch_alter_table("pages") as batch:
        batch.drop_column("ocr_confidence")
        batch.drop_column("source")
