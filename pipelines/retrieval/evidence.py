"""Evidence: the verbatim sentences of a document that bear on a query, each with its page.

Answers, key passages and key facts all rest on these: a sentence is quoted exactly as the
document has it (`text == document_text(pages)[start_char:end_char]`), so a reader can check it
on the cited page. Ranking inside the best passages is by the query's BM25 terms; the passage's
own retrieval score breaks ties, so a sentence of a strongly matching passage comes first.

With an embedder, a sentence's score also counts its meaning (pipelines.retrieval.semantic_evidence): a
sentence that shares no term with the query can be evidence ("decided under the statutes of
Pennsylvania" for "Which law governs?"). bench/results/retrieval.md measured it on the dev set.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.documents import PageText, Passage, document_text, page_spans
from pipelines.ingest.sentences import split_sentences
from pipelines.planted import is_instruction_like
from pipelines.protocols import Embedder
from pipelines.retrieval.bm25 import terms
from pipelines.retrieval.semantic_evidence import SEMANTIC_WEIGHT, semantic_scores

# A sentence shorter than this (a heading, a list marker) is never evidence on its own.
MIN_EVIDENCE_CHARS = 20


@dataclass(frozen=True)
class Evidence:
    """One quoted sentence: `text` is exactly the document's characters [start_char, end_char)
    of `document_text(pages)`; `page` is the page it starts on."""

    text: str
    page: int
    passage_ordinal: int
    start_char: int
    end_char: int
    score: float


class DocumentSentences:
    """The sentences of a whole document (split once), each with its page: a passage's
    evidence is every sentence that overlaps it, whole, even where the passage cut it."""

    def __init__(self, pages: Sequence[PageText]) -> None:
        self.pages = tuple(pages)
        self.text = document_text(self.pages)
        spans = page_spans(self.pages)
        self._page_starts = [start for _, start, _ in spans]
        self._page_numbers = [number for number, _, _ in spans]
        self.spans = split_sentences(self.text)
        self._starts = [start for start, _ in self.spans]
        # embedder name -> sentence span -> unit vector
        self._vector_cache: dict[str, dict[tuple[int, int], np.ndarray]] = {}
        self._term_counts: dict[str, int] | None = None

    def page_of(self, offset: int) -> int:
        index = max(0, bisect.bisect_right(self._page_starts, offset) - 1)
        return self._page_numbers[index]

    def overlapping(self, start: int, end: int) -> list[tuple[int, int]]:
        """Spans of the sentences that overlap document characters [start, end)."""
        first = max(0, bisect.bisect_right(self._starts, start) - 1)
        found = []
        for span in self.spans[first:]:
            if span[0] >= end:
                break
            if span[1] > start:
                found.append(span)
        return found

    def vectors(self, spans: Sequence[tuple[int, int]], embedder: Embedder) -> np.ndarray:
        """Unit vectors of the sentences at `spans` ([len(spans), D]); each sentence is embedded
        once per embedder, however many queries ask for it."""
        cache = self._vector_cache.setdefault(embedder.name, {})
        missing = [span for span in dict.fromkeys(spans) if span not in cache]
        if missing:
            vectors = np.asarray(
                embedder.embed([self.text[start:end] for start, end in missing]), dtype=np.float32
            )
            cache.update(zip(missing, vectors, strict=True))
        if not spans:
            return np.zeros((0, embedder.dimension), dtype=np.float32)
        return np.stack([cache[span] for span in spans])

    def term_sentence_counts(self) -> dict[str, int]:
        """How many of the document's sentences hold each term (counted once, on first use)."""
        if self._term_counts is None:
            counts: dict[str, int] = {}
            for start, end in self.spans:
                for term in set(terms(self.text[start:end])):
                    counts[term] = counts.get(term, 0) + 1
            self._term_counts = counts
        return self._term_counts


def sentence_evidence(
    ranked: Sequence[tuple[Passage, float]],
    query: str,
    pages: Sequence[PageText] | DocumentSentences,
    *,
    k: int = 3,
    embedder: Embedder | None = None,
    semantic_weight: float = SEMANTIC_WEIGHT,
) -> list[Evidence]:
    """The `k` sentences of the ranked passages (best first, as retrieval gives them) that match
    the query best, best first. Without an embedder that is the share of query terms a sentence
    holds, and none when no sentence shares a term; with one, pipelines.retrieval.semantic_evidence.
    Pass a DocumentSentences to split the document once for many queries (it also keeps the
    sentences' vectors)."""
    query_terms = set(terms(query))
    if k < 1 or not (query_terms or (embedder is not None and query.strip())):
        return []
    sentences = pages if isinstance(pages, DocumentSentences) else DocumentSentences(pages)
    # (rank of its passage, passage score, span, query terms it holds) per candidate sentence
    found: list[tuple[int, float, tuple[int, int], set[str]]] = []
    seen: set[int] = set()
    for rank, (passage, passage_score) in enumerate(ranked):
        for start, end in sentences.overlapping(passage.start_char, passage.end_char):
            text = sentences.text[start:end]
            if start in seen or len(text.strip()) < MIN_EVIDENCE_CHARS:
                continue
            seen.add(start)
            sentence_terms = terms(text)
            # Instruction-like text (pipelines.planted; DocumentInput masks it) is never quoted.
            if not sentence_terms or is_instruction_like(text):
                continue
            shared = query_terms.intersection(sentence_terms)
            if not shared and embedder is None:
                continue
            found.append((rank, passage_score, (start, end), shared))
    if embedder is None:
        scores: list[float | None] = [len(shared) / len(query_terms) for *_, shared in found]
    else:
        scores = semantic_scores(
            sentences,
            [span for _, _, span, _ in found],
            [shared for *_, shared in found],
            query,
            query_terms,
            embedder,
            semantic_weight,
        )
    candidates: list[tuple[float, float, int, Evidence]] = []
    for (rank, passage_score, (start, end), _), score in zip(found, scores, strict=True):
        if score is None:
            continue
        ordinal = ranked[rank][0].ordinal
        evidence = Evidence(
            sentences.text[start:end], sentences.page_of(start), ordinal, start, end, score
        )
        # The score, then the passage's score, then document order.
        candidates.append((-score, -passage_score, rank * 100_000 + start, evidence))
    candidates.sort(key=lambda item: item[:3])
    return [evidence for *_, evidence in candidates[:k]]
