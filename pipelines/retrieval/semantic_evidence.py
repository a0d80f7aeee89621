"""How sentence_evidence scores sentences when it has an embedder (pipelines/retrieval/evidence.py).

Two signals in [0, 1], blended with weight SEMANTIC_WEIGHT on the embedding side:
- terms: the share of the query's terms a sentence holds, each weighted by its inverse document
  frequency over the document's sentences, so "agreement", in every sentence of a contract,
  counts for almost nothing and "governs" for much;
- meaning: the sentence's cosine with the query, rescaled from the candidates' lowest to their
  highest (a small model puts every sentence of a contract at 0.4-0.6 from a question about it;
  the order is what carries the signal).
A sentence that shares no query term qualifies when its cosine reaches MIN_SEMANTIC_SIMILARITY.

On the dev contracts, among the 29 questions whose labelled passage was retrieved, the first
evidence sentence held the clause for 66% at weight 0.3 (62% at 0.5 and 0.7) against 55% for
shared terms alone (bench/results/retrieval.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from pipelines.protocols import Embedder


class DocumentSentences(Protocol):
    """What the scores read of a document's sentences (pipelines.retrieval.evidence has them)."""

    @property
    def spans(self) -> Sequence[tuple[int, int]]: ...

    def term_sentence_counts(self) -> dict[str, int]: ...

    def vectors(self, spans: Sequence[tuple[int, int]], embedder: Embedder) -> Any: ...


SEMANTIC_WEIGHT = 0.3
MIN_SEMANTIC_SIMILARITY = 0.3


def term_weights(sentences: DocumentSentences, query_terms: set[str]) -> dict[str, float]:
    """BM25's inverse document frequency of each query term over the document's sentences."""
    counts = sentences.term_sentence_counts()
    num = max(len(sentences.spans), 1)
    return {
        term: math.log(1.0 + (num - counts.get(term, 0) + 0.5) / (counts.get(term, 0) + 0.5))
        for term in query_terms
    }


def semantic_scores(
    sentences: DocumentSentences,
    spans: Sequence[tuple[int, int]],
    shared_terms: Sequence[set[str]],
    query: str,
    query_terms: set[str],
    embedder: Embedder,
    weight: float = SEMANTIC_WEIGHT,
) -> list[float | None]:
    """One score per candidate sentence (None: it does not qualify); see the module docstring."""
    if not spans:
        return []
    weights = term_weights(sentences, query_terms)
    total = sum(weights.values()) or 1.0
    shares = np.array([sum(weights[t] for t in shared) / total for shared in shared_terms])
    (query_vector,) = np.asarray(embedder.embed([query]), dtype=np.float32)
    # cosines: [num_candidates]
    cosines = sentences.vectors(spans, embedder) @ query_vector
    low, high = float(cosines.min()), float(cosines.max())
    meaning = (cosines - low) / (high - low) if high > low else np.ones_like(cosines)
    blended = (1.0 - weight) * shares + weight * meaning
    return [
        float(score) if shared or cosine >= MIN_SEMANTIC_SIMILARITY else None
        for score, shared, cosine in zip(blended, shared_terms, cosines, strict=True)
    ]
