"""A document's stored key facts as the answer pipeline takes them (pipelines.answer_facts)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import FactSource
from app.services import facts as fact_service
from pipelines.answer_facts import KnownFact


def known_facts(sessions: sessionmaker[Session], document_id: int) -> tuple[KnownFact, ...]:
    """The document's facts (none before its facts job ran): those with a value and quotes, and
    those the job searched for and left empty (KnownFact.missing)."""
    with sessions() as session:
        rows = fact_service.list_facts(session=session, document_id=document_id)
        known = []
        for row in rows:
            if row.source == FactSource.NONE:
                known.append(KnownFact(row.field, row.label, "", (), missing=True))
            elif row.value:
                spans = tuple(
                    (int(quote["start_char"]), int(quote["end_char"]))
                    for quote in row.evidence or ()
                    if quote.get("start_char") is not None and quote.get("end_char") is not None
                )
                known.append(KnownFact(row.field, row.label, row.value, spans))
        return tuple(known)
