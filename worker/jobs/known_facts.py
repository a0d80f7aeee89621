"""A document's stored key facts as the pipelines take them (pipelines.answer.from_facts.KnownFact):
the answer job's, the collection table's and the summary lead's one reading of the Fact rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import FactSource
from app.services import facts as fact_service
from pipelines.answer.from_facts import KnownFact
from pipelines.inputs import DocumentInput
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.summary.lead import lead_sentences
from worker.jobs.result_rows import sentence_rows


def facts_in(session: Session, document_id: int) -> tuple[KnownFact, ...]:
    """The document's facts (none before its facts job ran): those with a value, with their
    quotes' spans, first quote and page, and those the job searched for and left empty
    (KnownFact.missing)."""
    known = []
    for row in fact_service.list_facts(session=session, document_id=document_id):
        if row.source == FactSource.NONE:
            known.append(KnownFact(row.field, row.label, "", missing=True))
        elif row.value:
            evidence = row.evidence or ()
            spans = tuple(
                (int(quote["start_char"]), int(quote["end_char"]))
                for quote in evidence
                if quote.get("start_char") is not None and quote.get("end_char") is not None
            )
            quote = evidence[0]["text"] if evidence else ""
            known.append(
                KnownFact(
                    row.field,
                    row.label,
                    row.value,
                    spans,
                    quote=quote,
                    page=row.page,
                    origin=row.origin or "",
                    table=tuple(row.value_table or ()),
                )
            )
    return tuple(known)


def known_facts(sessions: sessionmaker[Session], document_id: int) -> tuple[KnownFact, ...]:
    """facts_in, in a session of its own."""
    with sessions() as session:
        return facts_in(session, document_id)


def lead_rows(session: Session, document_id: int, document: DocumentInput) -> list[dict[str, Any]]:
    """The summary lead (pipelines.summary.lead) from the document's facts as stored now, as
    the rows Summary.lead holds; none before its first facts job."""
    facts = facts_in(session, document_id)
    if not facts:
        return []
    lead = lead_sentences(facts, DocumentSentences(document.pages), document.passages)
    return sentence_rows(lead)
