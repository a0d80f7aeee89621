"""Hybrid ranking of a document's passages: BM25 plus sentence embeddings, fused.

BM25 finds the clause that uses the question's words; the embeddings find the one that says the
same thing in other words ("governed by the laws of Ohio" for "Which law applies?"). A passage's
dense score is its best sentence's cosine with the query (pipelines.vectors). The fusion is a
normalised score blend, 0.3 x BM25 / max BM25 + 0.7 x cosine rescaled to [0, 1] over the
document's passages: on the dev contracts it found the labelled clause among the top 3 for 50% of
the questions, against 34% for BM25 alone, 48% for the cosine alone and 40-48% for reciprocal
rank fusion (bench/results/retrieval.md; 58 questions, so a few points are one question). RRF,
kept as an option, flattens the ranks: with k = 60 a passage both rankings list beats one only
the dense ranking finds, which is the very passage hybrid retrieval is for.

Without stored passage vectors or an embedder, HybridIndex ranks exactly as PassageIndex does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pipelines.documents import Passage
from pipelines.inputs import DocumentInput
from pipelines.protocols import Embedder
from pipelines.retrieval.bm25 import PassageIndex
from pipelines.vectors import PassageVectors


@dataclass(frozen=True)
class Fusion:
    """How BM25 and dense scores combine. "rrf": weight / (rrf_k + rank) summed over both
    rankings (ranks from 1); "blend": (1 - dense_weight) * bm25 / max(bm25) + dense_weight *
    cosine rescaled to [0, 1] over the document's passages."""

    method: Literal["rrf", "blend"] = "blend"
    dense_weight: float = 0.7
    rrf_k: int = 60

    def __post_init__(self) -> None:
        if self.method not in ("rrf", "blend"):
            raise ValueError(f"fusion method must be 'rrf' or 'blend', not {self.method!r}")
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError("dense_weight must lie in [0, 1]")
        if self.rrf_k < 1:
            raise ValueError("rrf_k must be at least 1")


DEFAULT_FUSION = Fusion()


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score (the highest is 1; ties in document order)."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks


def fuse(bm25: np.ndarray, dense: np.ndarray, fusion: Fusion = DEFAULT_FUSION) -> np.ndarray:
    """Fused scores, one per passage, from BM25 scores and cosines of the same passages."""
    # bm25, dense, result: [num_passages]
    if bm25.shape != dense.shape:
        raise ValueError(f"score shapes differ: {bm25.shape} and {dense.shape}")
    if len(bm25) == 0:
        return np.zeros(0, dtype=np.float64)
    if fusion.method == "rrf":
        bm25_part = np.where(bm25 > 0, 1.0 / (fusion.rrf_k + _ranks(bm25)), 0.0)
        dense_part = 1.0 / (fusion.rrf_k + _ranks(dense))
    else:
        top = bm25.max()
        bm25_part = bm25 / top if top > 0 else np.zeros_like(bm25)
        low, high = dense.min(), dense.max()
        dense_part = (dense - low) / (high - low) if high > low else np.zeros_like(dense)
    return (1.0 - fusion.dense_weight) * bm25_part + fusion.dense_weight * dense_part


class HybridIndex(PassageIndex):
    """A PassageIndex whose `scores` and `rank` fuse BM25 with embeddings (module docstring).

    `vectors` are the passages' vectors made by `embedder` (PassageVectors, or a
    [num_passages, D] array of one vector each); `embedder` embeds the query. With either
    missing it is BM25 alone.
    """

    def __init__(
        self,
        passages: Sequence[Passage],
        vectors: PassageVectors | np.ndarray | None,
        embedder: Embedder | None,
        *,
        fusion: Fusion = DEFAULT_FUSION,
    ) -> None:
        super().__init__(passages)
        self.fusion = fusion
        self._embedder = embedder if vectors is not None else None
        self._vectors: PassageVectors | None = None
        if self._embedder is not None and vectors is not None:
            if not isinstance(vectors, PassageVectors):
                vectors = PassageVectors.one_per_passage(np.asarray(vectors, dtype=np.float32))
            if vectors.num_passages != len(self.passages):
                raise ValueError(
                    f"vectors cover {vectors.num_passages} passages, not {len(self.passages)}"
                )
            self._vectors = vectors
        self._query_cache: dict[str, np.ndarray] = {}

    @property
    def is_hybrid(self) -> bool:
        return self._vectors is not None

    def bm25_scores(self, query: str) -> np.ndarray:
        return super().scores(query)

    def dense_scores(self, query: str) -> np.ndarray:
        """Each passage's best cosine with the query; zeros without embeddings."""
        if self._vectors is None or self._embedder is None:
            return np.zeros(len(self.passages), dtype=np.float64)
        return self._vectors.scores(self.query_vector(query))

    def query_vector(self, query: str) -> np.ndarray:
        """The query's unit vector ([D]); the last few queries are kept (an answer ranks its
        question twice)."""
        if self._embedder is None:
            raise ValueError("this index has no embedder")
        if query not in self._query_cache:
            if len(self._query_cache) >= 8:
                self._query_cache.clear()
            (vector,) = np.asarray(self._embedder.embed([query]), dtype=np.float32)
            self._query_cache[query] = vector
        return self._query_cache[query]

    def scores(self, query: str) -> np.ndarray:
        bm25 = self.bm25_scores(query)
        if self._vectors is None or not query.strip():
            return bm25
        return fuse(bm25, self.dense_scores(query), self.fusion)


def index_for(
    document: DocumentInput, embedder: Embedder | None, *, fusion: Fusion = DEFAULT_FUSION
) -> PassageIndex:
    """The best index the document allows: hybrid when its passages carry embeddings and an
    embedder is given (the one that made them), else BM25 alone."""
    if document.passage_embeddings is None or embedder is None:
        return PassageIndex(document.passages)
    return HybridIndex(document.passages, document.passage_embeddings, embedder, fusion=fusion)
