"""The passages of a collection that match a question best: the database's full-text ranking
(app.services.search, any word) fused by rank (app.services.search_fusion.reciprocal_rank_fusion)
with the stored passage embeddings where they exist (pipelines.retrieval.library_ranking). Passages without vectors of the embedder's model are ranked by
their words alone; nothing is embedded here, so a question never waits for a collection's
documents to be embedded (`longdoc embed --missing` does that ahead of time)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import CollectionDocument, Passage
from app.services.search import SearchFilters, search_passages
from app.services.search_fusion import reciprocal_rank_fusion
from pipelines.protocols import Embedder
from pipelines.retrieval.library_ranking import dense_ranking
from worker.model.vector_store import STORED_DTYPE

NUM_CANDIDATES = 100


@dataclass(frozen=True)
class RankedId:
    passage_id: int
    document_id: int
    score: float


def rank_collection(
    session: Session,
    *,
    collection_id: int,
    question: str,
    embedder: Embedder | None,
    limit: int = 24,
    filters: SearchFilters | None = None,
) -> tuple[list[RankedId], dict[str, int]]:
    """The best `limit` passages of the collection, best first, and counts for the stats."""
    filters = filters or SearchFilters(collection_id=collection_id)
    hits = search_passages(
        session=session,
        query=question,
        filters=filters,
        limit=NUM_CANDIDATES,
        match="any",
        max_query_chars=None,  # the question's length was checked when it was asked
    )
    document_of = {hit.passage_id: hit.document_id for hit in hits}
    rankings = [[hit.passage_id for hit in hits]]
    num_dense = 0
    if embedder is not None and question.strip():
        rows = session.execute(
            select(Passage.id, Passage.document_id, Passage.embedding)
            .join(CollectionDocument, CollectionDocument.document_id == Passage.document_id)
            .where(
                CollectionDocument.collection_id == collection_id,
                Passage.embedding_model == embedder.name,
                Passage.embedding.is_not(None),
            )
        ).all()
        dimension = embedder.dimension
        row_bytes = dimension * np.dtype(STORED_DTYPE).itemsize
        usable = [r for r in rows if r.embedding and len(r.embedding) % row_bytes == 0]
        if usable:
            groups = [
                np.frombuffer(r.embedding, dtype=STORED_DTYPE).reshape(-1, dimension)
                for r in usable
            ]
            (query,) = np.asarray(embedder.embed([question]), dtype=np.float32)
            keys = [r.id for r in usable]
            rankings.append(
                dense_ranking(
                    keys, [g.astype(np.float32) for g in groups], query, limit=NUM_CANDIDATES
                )
            )
            document_of |= {r.id: r.document_id for r in usable}
            num_dense = len(usable)
    fused = reciprocal_rank_fusion(rankings)[:limit]
    ranked = [RankedId(key, document_of[key], score) for key, score in fused]
    return ranked, {"num_text_matches": len(hits), "num_embedded_passages": num_dense}
