"""Documents and what ingest makes of them: pages, redactions, passages."""

import enum
from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.models.base import NEVER_REUSED, Base, UTCDateTime, str_enum, utc_now


class DocumentKind(enum.StrEnum):
    LEGAL = "legal"
    MEDICAL = "medical"
    OTHER = "other"


class DocumentStatus(enum.StrEnum):
    PENDING = "pending"
    PARSING = "parsing"
    READY = "ready"
    FAILED = "failed"


class PageSource(enum.StrEnum):
    """Where a page's text came from (pipelines/ingest/page_sources.py)."""

    TEXT_LAYER = "text_layer"
    OCR = "ocr"


class Document(Base):
    __tablename__ = "documents"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # sha256 hex of the file; several documents hold one file when their readers differ
    # (migration 0015: an upload never reaches a document its uploader may not read).
    content_hash: Mapped[str] = mapped_column(String(64), index=True)
    file_name: Mapped[str] = mapped_column(String(255))
    title: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[DocumentKind] = mapped_column(str_enum(DocumentKind, "document_kind"))
    num_pages: Mapped[int] = mapped_column(Integer)
    num_chars: Mapped[int] = mapped_column(Integer)
    num_tokens: Mapped[int] = mapped_column(Integer)
    status: Mapped[DocumentStatus] = mapped_column(str_enum(DocumentStatus, "document_status"))
    error_code: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    stored_path: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now, onupdate=utc_now)
    # Pages read by OCR, and boxes that hide text still in the file (migration 0006; 0 before).
    num_ocr_pages: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    num_redactions: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # True when the text under those boxes was kept in the pages (LONGDOC_KEEP_HIDDEN_TEXT).
    is_hidden_text_kept: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=text("false")
    )
    # --- accounts (migration 0013) ---
    # Who stored it; None: stored before accounts, or by the local admin. SET NULL: deleting a
    # user leaves their documents to the admins.
    owner_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    # --- end accounts ---

    # passive_deletes: the database's ON DELETE CASCADE removes children without loading them.
    pages: Mapped[list["Page"]] = relationship(
        order_by="Page.number", cascade="all, delete-orphan", passive_deletes=True
    )
    passages: Mapped[list["Passage"]] = relationship(
        order_by="Passage.ordinal", cascade="all, delete-orphan", passive_deletes=True
    )


class Page(Base):
    __tablename__ = "pages"
    # The unique (document_id, number) index also serves lookups by document_id alone.
    __table_args__ = (
        UniqueConstraint("document_id", "number"),
        CheckConstraint("number >= 1", name="number_positive"),
        NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)  # 1-based, as printed in citations
    text: Mapped[str] = mapped_column(Text)
    # A PageSource value; a plain string, so a new source needs no constraint change.
    source: Mapped[str] = mapped_column(
        String(16), default=PageSource.TEXT_LAYER.value, server_default=PageSource.TEXT_LAYER.value
    )
    ocr_confidence: Mapped[float | None] = mapped_column(Float)  # 0 to 1; None: text layer


class Redaction(Base):
    """A dark box drawn over text that is still in the file (pipelines/ingest/redactions.py): where it
    is (PDF points, origin bottom left) and how many characters it hides. Never the text."""

    __tablename__ = "redactions"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), index=True
    )
    page: Mapped[int] = mapped_column(Integer)
    left: Mapped[float] = mapped_column(Float)
    bottom: Mapped[float] = mapped_column(Float)
    right: Mapped[float] = mapped_column(Float)
    top: Mapped[float] = mapped_column(Float)
    num_chars: Mapped[int] = mapped_column(Integer)


class Passage(Base):
    __tablename__ = "passages"
    __table_args__ = (
        UniqueConstraint("document_id", "ordinal"),
        CheckConstraint("first_page <= last_page", name="page_range"),
        CheckConstraint("start_char <= end_char", name="char_range"),
        NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)  # position in the document's reading order
    first_page: Mapped[int] = mapped_column(Integer)
    last_page: Mapped[int] = mapped_column(Integer)
    start_char: Mapped[int] = mapped_column(Integer)
    end_char: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    num_tokens: Mapped[int] = mapped_column(Integer)
    # The unit vectors of the passage's sentences (float16, row after row) and the embedding model
    # that made them; both None until it is embedded (before migration 0002, or embeddings off).
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary)
    embedding_model: Mapped[str | None] = mapped_column(String(100))
