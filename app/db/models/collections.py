"""Collections: named sets of documents, their members and the answers across them."""

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import NEVER_REUSED, Base, JsonType, UTCDateTime, str_enum, utc_now
from app.db.models.results import SupportStatus


class Collection(Base):
    """A named set of documents (a matter, a case file, a set of papers). A document may be in
    several. Deleting a collection never deletes its documents; deleting a document removes it
    from its collections (both by the link table's ON DELETE CASCADE).

    A name is unique per owner (migration 0016), not across the library: an editor may name a
    collection like one they may not read, and is not told that it exists."""

    __tablename__ = "collections"
    __table_args__ = (UniqueConstraint("owner_id", "name"), NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    # Who created it; None: the admins' (the local admin's, the inbox's without a user, made
    # before 0016, or its owner deleted since). Access still follows the grants alone.
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))


class CollectionDocument(Base):
    __tablename__ = "collection_documents"

    collection_id: Mapped[int] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True
    )
    # Its own index: "which collections hold this document" (the key leads with the collection).
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    added_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class CollectionAnswer(Base):
    """The answer to a question across a collection (worker/jobs/collection.py).

    `citations`: [{"document_id", "title", "page"}]; `quotes`: as Answer.quotes, each with its
    "document_id" and "title"; `rows`: the per-document table of a question about every document,
    [{"document_id", "title", "answer", "quote", "page", "source"}] ("fact", "model", "quote" or
    "none"). The question and quotes are private like the documents: deleting the collection
    deletes them, and deleting a document deletes the answers that quote it
    (app/services/collections.py).
    """

    __tablename__ = "collection_answers"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection_id: Mapped[int] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), unique=True
    )
    question: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(16))  # "retrieval" | "per_document"
    answer: Mapped[str] = mapped_column(Text)
    citations: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, default=list)
    quotes: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, default=list)
    rows: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, default=list)
    document_ids: Mapped[list[int]] = mapped_column(JsonType, default=list)  # every one it cites
    support: Mapped[SupportStatus | None] = mapped_column(str_enum(SupportStatus, "support_status"))
    model: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    stats: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
