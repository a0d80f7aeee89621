"""Ranking across documents by embeddings: the passages whose best sentence is closest to a query.

A collection's question fuses this ranking with the database's full-text ranking
(worker/jobs/collection_retrieval.py). The two cover different candidates (full text: passages
sharing a word with the query; embeddings: those with vectors), and their scores are on unrelated
scales (BM25 or ts_rank against cosines), so they are fused by rank, not by score, with
app.services.search_fusion.reciprocal_rank_fusion (sum of 1 / (k + rank) over the rankings that
list a passage, k = 60), the one rank fusion that library search uses too. Within one document
pipelines.retrieval.hybrid blends scores instead.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

Key = TypeVar("Key", bound=Hashable)


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
