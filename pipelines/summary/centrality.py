"""Sentence centrality: continuous LexRank (Erkan & Radev, 2004) over cosine similarity of
TF-IDF vectors, or of sentence embeddings.

The similarity matrix W (N x N, zero diagonal) is never built: with unit rows V, W x = V (V^T x)
- x, so one power-iteration step costs O(non-zeros) for TF-IDF and O(N * dimension) for
embeddings, and a 2,000-page document takes no more memory than its vectors. Embedding cosines
can be negative, so their similarity is shifted into [0, 1] as (1 + cos) / 2, which keeps the
product form (the clamp max(0, cos) would not).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.retrieval.bm25 import terms

DAMPING = 0.85
MAX_ITERATIONS = 100
TOLERANCE = 1e-9


@dataclass(frozen=True)
class SparseRows:
    """Unit-length TF-IDF rows in coordinate form: row i has weights[k] at column cols[k] for
    every k with rows[k] == i. An empty row (no terms) stays all zero."""

    rows: np.ndarray  # [nnz] int64
    cols: np.ndarray  # [nnz] int64
    weights: np.ndarray  # [nnz] float64
    num_rows: int
    num_cols: int

    def times(self, y: np.ndarray) -> np.ndarray:
        """V @ y: y [num_cols] -> [num_rows]."""
        return np.bincount(self.rows, weights=self.weights * y[self.cols], minlength=self.num_rows)

    def transposed_times(self, x: np.ndarray) -> np.ndarray:
        """V^T @ x: x [num_rows] -> [num_cols]."""
        return np.bincount(self.cols, weights=self.weights * x[self.rows], minlength=self.num_cols)

    def row(self, i: int) -> dict[int, float]:
        lo, hi = np.searchsorted(self.rows, [i, i + 1])
        return dict(zip(self.cols[lo:hi].tolist(), self.weights[lo:hi].tolist(), strict=True))

    def norms_squared(self) -> np.ndarray:
        """[num_rows]: 1 for a row with terms, 0 for an empty one."""
        return np.bincount(self.rows, weights=self.weights**2, minlength=self.num_rows)


def tfidf_rows(texts: Sequence[str]) -> SparseRows:
    """TF-IDF of each text over our BM25 terms (pipelines.retrieval.bm25.terms): sublinear term
    frequency (1 + log tf) times smoothed idf (log((1 + N) / (1 + df)) + 1), rows unit length."""
    counts = [Counter(terms(text)) for text in texts]
    vocabulary: dict[str, int] = {}
    document_frequency: Counter[str] = Counter()
    for count in counts:
        document_frequency.update(count.keys())
    for term in sorted(document_frequency):
        vocabulary[term] = len(vocabulary)
    num = len(texts)
    rows, cols, weights = [], [], []
    for i, count in enumerate(counts):
        row = {
            vocabulary[term]: (1 + math.log(tf))
            * (math.log((1 + num) / (1 + document_frequency[term])) + 1)
            for term, tf in count.items()
        }
        norm = math.sqrt(sum(w * w for w in row.values()))
        for col in sorted(row):
            rows.append(i)
            cols.append(col)
            weights.append(row[col] / norm)
    return SparseRows(
        np.asarray(rows, dtype=np.int64),
        np.asarray(cols, dtype=np.int64),
        np.asarray(weights, dtype=np.float64),
        num,
        len(vocabulary),
    )


def sparse_similarity(vectors: SparseRows) -> Callable[[np.ndarray], np.ndarray]:
    """x -> W x for W the cosine similarity of the rows, diagonal zero."""
    self_similarity = vectors.norms_squared()

    def times(x: np.ndarray) -> np.ndarray:
        return vectors.times(vectors.transposed_times(x)) - self_similarity * x

    return times


def embedding_similarity(embeddings: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """x -> W x for W = (1 + cos) / 2 of the unit rows of `embeddings` [N, D], diagonal zero."""
    # embeddings: [N, D], unit rows
    matrix = np.asarray(embeddings, dtype=np.float64)

    def times(x: np.ndarray) -> np.ndarray:
        # (1 + cos)/2 with cos(i, i) = 1, so the diagonal term to remove is x itself.
        return 0.5 * (x.sum() + matrix @ (matrix.T @ x)) - x

    return times


def lexrank(similarity: Callable[[np.ndarray], np.ndarray], num: int) -> np.ndarray:
    """Stationary distribution [num] of the random walk over the similarity graph, with
    damping: p = (1 - d) / N + d * W (p / degree). A sentence like no other (degree 0) hands
    its share to all sentences evenly."""
    if num == 0:
        return np.zeros(0)
    degree = similarity(np.ones(num))
    isolated = degree <= 1e-12
    safe_degree = np.where(isolated, 1.0, degree)
    scores = np.full(num, 1.0 / num)
    for _ in range(MAX_ITERATIONS):
        walked = similarity(np.where(isolated, 0.0, scores / safe_degree))
        walked += scores[isolated].sum() / num
        updated = (1 - DAMPING) / num + DAMPING * walked
        updated /= updated.sum()
        if np.abs(updated - scores).sum() < TOLERANCE:
            return updated
        scores = updated
    return scores
