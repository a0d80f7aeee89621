"""Ranking across a collection (worker/jobs/collection_retrieval.py) with the real embedder: the
database's full text finds the passages that share the question's words, the stored embeddings
the one that says it in other words; fused, both come first, and only the collection's."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.db.models import Passage
from app.services import collections
from tests.app.library_rows import FILLER, store
from worker.jobs.collection_retrieval import rank_collection
from worker.model.vector_store import embed_passages, to_bytes

LAW = "This Agreement is governed by the laws of the State of Ohio."
NOTICE = "Either party may end this lease on three months written notice."


def _embed_all(session: Session, embedder) -> None:
    rows = session.query(Passage).order_by(Passage.id).all()
    groups = embed_passages(embedder, [row.text for row in rows])
    for row, group in zip(rows, groups, strict=True):
        session.execute(
            update(Passage)
            .where(Passage.id == row.id)
            .values(embedding=to_bytes(group), embedding_model=embedder.name)
        )
    session.commit()


def test_words_and_meaning_fused_within_the_collection(session: Session, embedder) -> None:
    supply = store(session, "Supply Agreement", [FILLER, LAW])
    lease = store(session, "Office Lease", [NOTICE, FILLER])
    outside = store(session, "Other Contract", [LAW])
    matter = collections.create_collection(session=session, name="Matter")
    collections.add_documents(
        session=session, collection_id=matter.id, document_ids=[supply.id, lease.id]
    )
    session.commit()
    _embed_all(session, embedder)
    question = "Which jurisdiction's statutes apply?"  # no word in common with LAW

    words_only, counts = rank_collection(
        session, collection_id=matter.id, question=question, embedder=None
    )
    assert words_only == [] and counts["num_embedded_passages"] == 0

    fused, counts = rank_collection(
        session, collection_id=matter.id, question=question, embedder=embedder
    )
    assert (fused[0].document_id, counts["num_embedded_passages"]) == (supply.id, 4)
    assert outside.id not in {r.document_id for r in fused}

    both, _ = rank_collection(
        session,
        collection_id=matter.id,
        question="How much notice ends the lease?",
        embedder=embedder,
    )
    assert both[0].document_id == lease.id  # the words and the meaning agree
