"""Ranking across documents: the database's full-text ranking fused with embeddings.

The two rankings cover different candidates (full text: passages sharing a word with the query;
embeddings: those with vectors), and their scores are on unrelated scales (BM25 or ts_rank against
cosines), so they are fused by rank, not by score: reciprocal rank fusion, sum of 1 / (k + rank)
over the rankings that list a passage (k = 60, as in Cormack et al. 2009). Within one document
pipelines.retrieval.hybrid blends scores instead, where both cover the same passages.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

Key = TypeVar("Key", bound=Hashable)
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Key]], *, k: int = RRF_K
) -> list[tuple[Key, float]]:
    """Keys of all rankings (each best first), by fused score, best first; ties keep the order
    of first appearance."""
    if k < 1:
        raise ValueError("k must be at least 1")
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def dense_ranking(
    keys: Sequence[Key], vectors: Sequence[np.ndarray], query: np.ndarray, *, limit: int
) -> list[Key]:
    """The `limit` keys whose vectors (each [num_sentences, D], unit rows) hold the sentence
    closest to `query` ([D], unit), best first."""
    if len(keys) != len(vectors):
        raise ValueError("one vector group per key")
    if not keys:
        return []
    best = np.array([float((group @ query).max()) if len(group) else -1.0 for group in vectors])
    order = np.argsort(-best, kind="stable")[:limit]
    return [keys[i] for i in order]
