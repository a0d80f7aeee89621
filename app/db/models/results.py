"""A document's results: summaries, answers and key facts."""

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import (
    EMPTY_LIST,
    NEVER_REUSED,
    Base,
    JsonType,
    UTCDateTime,
    str_enum,
    utc_now,
)


class FactSource(enum.StrEnum):
    MODEL = "model"  # the model's value, validated against its quote
    RULE = "rule"  # the model's value failed validation; a rule read this one from the quote
    NONE = "none"  # no value found: left empty rather than guessed


class SummaryMethod(enum.StrEnum):
    ONE_PASS = "one_pass"
    HIERARCHICAL = "hierarchical"


class SupportStatus(enum.StrEnum):
    """How an answer stands against its quotes (pipelines/answer/check.py says what each means)."""

    SUPPORTED = "supported"
    PARTLY_SUPPORTED = "partly_supported"
    UNCHECKED = "unchecked"
    UNSUPPORTED = "unsupported"
    QUOTED = "quoted"
    NO_ANSWER = "no_answer"


class Summary(Base):
    __tablename__ = "summaries"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), index=True
    )
    # Unique when set: a redelivered task finds its summary instead of writing a second one.
    # SET NULL: pruning old jobs keeps their results.
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), unique=True
    )
    method: Mapped[SummaryMethod] = mapped_column(str_enum(SummaryMethod, "summary_method"))
    text: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    stats: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    # The extractive summary beside the model's: sentences quoted verbatim, in document order,
    # each {"text", "page", "start_char", "end_char", "passage_ordinal", "score"}.
    key_passages: Mapped[list[dict[str, Any]]] = mapped_column(
        JsonType, default=list, server_default=EMPTY_LIST
    )
    # Each sentence of `text` checked against the document, in order: {"text", "status"
    # ("supported" | "unsupported" | "no_evidence"), "quotes" (as key_passages), "missing"}.
    # Empty for summaries from before the check: they are shown as written.
    sentence_support: Mapped[list[dict[str, Any]]] = mapped_column(
        JsonType, default=list, server_default=EMPTY_LIST
    )
    # The summary's first lines, from the document's key facts (pipelines.summary.lead): rows as
    # sentence_support's, all supported. Set when the summary is saved and replaced whenever the
    # document's facts job saves again; empty before its first facts job.
    lead: Mapped[list[dict[str, Any]]] = mapped_column(
        JsonType, default=list, server_default=EMPTY_LIST
    )


class Answer(Base):
    __tablename__ = "answers"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), unique=True
    )
    question: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    cited_passage_ids: Mapped[list[int]] = mapped_column(JsonType, default=list)
    cited_pages: Mapped[list[int]] = mapped_column(JsonType, default=list)
    model: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    stats: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    # The sentences the answer rests on, verbatim: [{"text", "page", "start_char", "end_char",
    # "passage_ordinal", "score"}], best first. Empty for answers from before quotes existed.
    quotes: Mapped[list[dict[str, Any]]] = mapped_column(
        JsonType, default=list, server_default=EMPTY_LIST
    )
    # None for answers from before the check existed.
    support: Mapped[SupportStatus | None] = mapped_column(str_enum(SupportStatus, "support_status"))
    # The model's own text when the best quote replaced it (unsupported, looping, empty).
    model_answer: Mapped[str | None] = mapped_column(Text)
    # What the model's answer stated that neither the quotes nor the document hold.
    unsupported_claims: Mapped[list[str]] = mapped_column(
        JsonType, default=list, server_default=EMPTY_LIST
    )


class Fact(Base):
    """One key fact of a document (pipelines.facts.extract): a field's value, the quoted sentences it
    rests on ({"text", "page", "start_char", "end_char"} each, verbatim), its page and how it
    was found, where it stands (`origin`) and, for a value of several parts, its rows
    (`value_table`). A document holds the facts of its latest facts job only; `position` is the
    field's place in its schema, for showing and exporting fields in order."""

    __tablename__ = "facts"
    __table_args__ = (
        UniqueConstraint("document_id", "field"),
        CheckConstraint("confidence >= 0 AND confidence <= 1", name="confidence_range"),
        NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    # SET NULL: pruning old jobs keeps their facts.
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), index=True
    )
    field: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer)
    value: Mapped[str] = mapped_column(Text)
    normalized_value: Mapped[str] = mapped_column(Text)
    evidence: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, default=list)
    page: Mapped[int | None] = mapped_column(Integer)
    confidence: Mapped[float] = mapped_column(Float)
    source: Mapped[FactSource] = mapped_column(str_enum(FactSource, "fact_source"))
    model: Mapped[str] = mapped_column(Text)
    # Where the value was read, for a person: "caption, p. 1", "section 2 DOSAGE AND
    # ADMINISTRATION, p. 3", "clause 12.1, p. 9"; "" for an empty value.
    origin: Mapped[str] = mapped_column(Text, default="", server_default=text("''"))
    # A value of several rows (a label's doses: {"indication", "population", "dose", "page",
    # "start_char", "end_char"} each); empty for every other field.
    value_table: Mapped[list[dict[str, Any]]] = mapped_column(
        JsonType, default=list, server_default=EMPTY_LIST
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
