"""What ranks a document's passages for a query: BM25 (pipelines.retrieval.bm25.PassageIndex) today,
hybrid BM25 + embeddings where the worker supplies one; the pipelines take either."""

from __future__ import annotations

from typing import Protocol

from pipelines.documents import Passage


class PassageRanker(Protocol):
    def rank(self, query: str, k: int | None = None) -> list[tuple[Passage, float]]:
        """Passages by descending relevance to `query` (ties in document order), at most `k`."""
        ...
