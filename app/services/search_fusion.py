"""Search results re-ranked with the passage embeddings, where the passages have them.

The full-text ranking (app.services.search) picks the candidates: the best NUM_CANDIDATES
passages by BM25 (SQLite) or ts_rank (PostgreSQL). Each candidate with stored vectors of the
query encoder's model gets a dense score, its best sentence's cosine with the query (as
pipelines.vectors scores passages for questions); the two rankings are then fused by rank:

    score = (1 - DENSE_WEIGHT) / (RRF_K + text rank) + DENSE_WEIGHT / (RRF_K + dense rank)

By rank, not by score, because the text scores are on a different scale on each database (a
negated BM25 against ts_rank's small floats): a score blend would order the same library
differently on SQLite and PostgreSQL; ranks fuse alike on both. The weight is the one measured
for questions on the dev contracts (bench/results/retrieval.md, sentence vectors: rank fusion
with dense weight 0.7 found the labelled clause in the top 3 for 48% of the questions, against 34%
for BM25 alone and 40% for equal weights; the score blend's 50% is one question more). With
equal weights two passages whose ranks swap would tie, and the paraphrase would not be lifted.

A candidate without vectors (not embedded yet, or by another model) takes its text rank as its
dense rank: the embeddings neither lift nor sink it. Only the candidates' vectors are read (at
most NUM_CANDIDATES rows), so the fusion costs one small query and one matrix product.

`reciprocal_rank_fusion` is the one rank fusion of the project's rankings across documents:
this search's and a collection question's (worker/jobs/collection_retrieval.py, unweighted). It
lives here because app/ may import neither pipelines/ nor worker/ (import-linter), and the
worker may import app/. Within one document pipelines.retrieval.hybrid blends scores instead.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol, TypeVar

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.embedding_models import STORED_DTYPE

NUM_CANDIDATES = 100
DENSE_WEIGHT = 0.7
RRF_K = 60  # as in Cormack et al. 2009

Key = TypeVar("Key", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Key] | Mapping[Key, int]],
    *,
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
) -> list[tuple[Key, float]]:
    """The keys of all rankings with their fused scores, best first: the sum, over the rankings
    that list a key, of weight / (k + rank). A ranking is keys best first (ranks 1, 2, ...) or
    a mapping of key to rank (from 1; keys may share one); each weight is 1 unless `weights`
    gives one per ranking. Ties keep the order of first appearance.

    The one rank fusion of library search (below) and of a collection's question
    (worker/jobs/collection_retrieval.py): both fuse rankings whose scores are on unrelated
    scales, so by rank, not by score."""
    if k < 1:
        raise ValueError("k must be at least 1")
    if weights is not None and len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[Key, float] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        pairs = (
            ranking.items()
            if isinstance(ranking, Mapping)
            else ((key, rank) for rank, key in enumerate(ranking, start=1))
        )
        for key, rank in pairs:
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


class QueryEmbedder(Protocol):
    """What embeds the query: app.query_encoder.QueryEncoder, or the worker's embedder."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str], /) -> np.ndarray: ...


def _stored_vectors(
    session: Session, ids: Sequence[int], model: str, dimension: int
) -> dict[int, np.ndarray]:
    """The candidates' stored sentence vectors of `model` ([k, D] float16 each), by id."""
    sql = (
        "SELECT id, embedding FROM passages"
        f" WHERE id IN ({', '.join(str(int(i)) for i in ids)})"
        " AND embedding_model = :model AND embedding IS NOT NULL"
    )
    row_bytes = dimension * np.dtype(STORED_DTYPE).itemsize
    groups = {}
    for passage_id, blob in session.execute(text(sql), {"model": model}):
        data = bytes(blob)
        if data and len(data) % row_bytes == 0:
            groups[passage_id] = np.frombuffer(data, dtype=STORED_DTYPE).reshape(-1, dimension)
    return groups


def fuse_with_embeddings(
    session: Session,
    ranked: Sequence[tuple[int, float]],
    embedder: QueryEmbedder,
    query_vector: Callable[[], np.ndarray],
    *,
    dense_weight: float = DENSE_WEIGHT,
) -> list[tuple[int, float]]:
    """`ranked` ((passage id, text score), best first) re-ordered by the fused score (module
    docstring), which it then carries; unchanged when no candidate has vectors of `embedder`'s
    model. `query_vector` gives the query's unit vector ([D]), asked for only when needed."""
    if len(ranked) < 2:
        return list(ranked)
    ids = [passage_id for passage_id, _ in ranked]
    groups = _stored_vectors(session, ids, embedder.name, embedder.dimension)
    if not groups:
        return list(ranked)
    embedded = [passage_id for passage_id in ids if passage_id in groups]
    # vectors: [num_sentences, D]; query_vector: [D]
    vectors = np.concatenate([groups[i] for i in embedded]).astype(np.float32)
    starts = np.cumsum([0, *[len(groups[i]) for i in embedded[:-1]]])
    best = np.maximum.reduceat(vectors @ query_vector(), starts)  # [num_embedded]
    order = np.argsort(-best, kind="stable")  # ties keep the text order
    dense_rank = {embedded[i]: rank for rank, i in enumerate(order, start=1)}
    # Every candidate in both rankings: one without vectors takes its text rank as dense rank.
    dense = {
        passage_id: dense_rank.get(passage_id, text_rank)
        for text_rank, passage_id in enumerate(ids, start=1)
    }
    # The text ranking first: ties keep the text order.
    return reciprocal_rank_fusion([ids, dense], weights=[1.0 - dense_weight, dense_weight])
