"""BM25 ranking of a document's passages for a query (bm25s), with our own simple word tokenizer.

Our tokenizer (lowercased words and numbers, English stop words dropped, a few common suffixes
stripped so "terminates", "terminated" and "termination" match) keeps ranking deterministic and independent of any model. Ties keep document order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from pipelines.documents import Passage
from pipelines.retrieval.bm25s_lib import STOPWORDS_EN, bm25s

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(STOPWORDS_EN)
# Tried in order; the first that leaves a stem of at least _MIN_STEM characters is cut.
_SUFFIXES = ("ions", "ion", "ings", "ing", "ed", "es", "e", "s")
_MIN_STEM = 4


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            return word[: -len(suffix)]
    return word


def terms(text: str) -> list[str]:
    """The words BM25 matches on: "Terminations of the Agreement" -> ["terminat", "agreement"]."""
    return [_stem(word) for word in _WORD.findall(text.lower()) if word not in _STOPWORDS]


class PassageIndex:
    """A BM25 index over passages; build once per document, query many times."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = tuple(passages)
        corpus = [terms(passage.text) for passage in self.passages]
        self._retriever: bm25s.BM25 | None = None
        if any(corpus):
            self._retriever = bm25s.BM25()
            self._retriever.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """One BM25 score per passage, in passage order; all zero when no query word occurs."""
        # scores: [num_passages]
        zeros = np.zeros(len(self.passages), dtype=np.float64)
        if self._retriever is None:
            return zeros
        known = [t for t in terms(query) if t in self._retriever.vocab_dict and t != ""]
        if not known:
            return zeros
        return np.asarray(self._retriever.get_scores(known), dtype=np.float64)

    def rank(self, query: str, k: int | None = None) -> list[tuple[Passage, float]]:
        """Passages by descending score (ties in document order), at most `k` of them."""
        scores = self.scores(query)
        # A stable sort on -score keeps document order among equal scores.
        order = np.argsort(-scores, kind="stable")
        if k is not None:
            order = order[:k]
        return [(self.passages[i], float(scores[i])) for i in order]


def top_passages(passages: Sequence[Passage], query: str, k: int) -> list[Passage]:
    """The `k` passages that match `query` best, best first (a one-off PassageIndex)."""
    return [passage for passage, _ in PassageIndex(passages).rank(query, k)]
