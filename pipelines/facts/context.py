"""Where each key fact is looked for: the field's passages, their sentences, and the quotes the
model reads.

Per field, the passages are those of its region: the document's first passages for a preamble
or a caption ("opening"), the best-ranked of its last third for a disposition ("closing"), or
the best-ranked overall ("anywhere"), ranked by any object with `.rank(query, k)` (BM25's
PassageIndex, or a hybrid index). The quotes are `sentence_evidence` over those passages: the
sentences sharing the most query terms. Rules read every sentence of the passages (a date
alone on a line shares no query term but is still the date).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from pipelines.documents import Passage
from pipelines.facts.schema import FieldSpec
from pipelines.retrieval.bm25 import terms
from pipelines.retrieval.evidence import DocumentSentences, Evidence, sentence_evidence

NUM_PASSAGES = 6  # ranked passages a field looks at
NUM_OPENING_PASSAGES = 3  # a preamble or caption fits in the first three
CLOSING_SHARE = 1 / 3  # a disposition is stated in the last third of an opinion
NUM_QUOTES = 2  # sentences the model reads (each prompt stays near 300 tokens)
# A quote longer than this (a table of contents, a page without full stops) is cut to a window
# around its first query word: the model reads a few hundred tokens, not a page.
MAX_QUOTE_CHARS = 500
_WINDOW_BEFORE_CHARS = 150
_WORD = re.compile(r"[a-z0-9]+")


class PassageRanker(Protocol):
    """What retrieval offers: passages by descending score for a query, at most k."""

    def rank(self, query: str, k: int | None = None) -> list[tuple[Passage, float]]: ...


@dataclass(frozen=True)
class FieldContext:
    """`quotes` (best first) are what the model reads; `sentences` are every sentence of the
    field's passages in document order, each scored by its share of the query's terms."""

    spec: FieldSpec
    quotes: tuple[Evidence, ...]
    sentences: tuple[Evidence, ...]
    document: DocumentSentences

    def ranked_sentences(self) -> list[Evidence]:
        """The sentences by descending score, document order among equals."""
        return sorted(self.sentences, key=lambda e: (-e.score, e.start_char))


def gather(
    spec: FieldSpec,
    passages: Sequence[Passage],
    ranker: PassageRanker,
    document: DocumentSentences,
) -> FieldContext:
    """The passages, sentences and quotes of one field."""
    ranked = _region_passages(spec, passages, ranker)
    quotes = sentence_evidence(ranked, spec.query, document, k=NUM_QUOTES)
    query_terms = set(terms(spec.query))
    sentences: dict[int, Evidence] = {}
    for passage, _ in ranked:
        for start, end in document.overlapping(passage.start_char, passage.end_char):
            if start in sentences:
                continue
            text = document.text[start:end]
            shared = len(query_terms.intersection(terms(text)))
            score = shared / len(query_terms) if query_terms else 0.0
            page = document.page_of(start)
            sentences[start] = Evidence(text, page, passage.ordinal, start, end, score)
    ordered = tuple(sentences[start] for start in sorted(sentences))
    windowed = tuple(_window(quote, query_terms, document) for quote in quotes)
    return FieldContext(spec, windowed, ordered, document)


def _region_passages(
    spec: FieldSpec, passages: Sequence[Passage], ranker: PassageRanker
) -> list[tuple[Passage, float]]:
    if spec.region == "opening":
        # Document order is the ranking: the first passage holds the preamble or caption.
        return [(passage, 1.0) for passage in passages[:NUM_OPENING_PASSAGES]]
    if spec.region == "closing":
        first = int(len(passages) * (1 - CLOSING_SHARE))
        closing = {passage.ordinal for passage in passages[first:]}
        ranked = [(p, s) for p, s in ranker.rank(spec.query) if p.ordinal in closing]
        return ranked[:NUM_PASSAGES]
    return ranker.rank(spec.query, NUM_PASSAGES)


def _window(quote: Evidence, query_terms: set[str], document: DocumentSentences) -> Evidence:
    """`quote`, or its MAX_QUOTE_CHARS around the first query word when it is longer."""
    if len(quote.text) <= MAX_QUOTE_CHARS:
        return quote
    first_hit = 0
    for match in _WORD.finditer(quote.text.lower()):
        if query_terms.intersection(terms(match.group(0))):
            first_hit = match.start()
            break
    start = max(0, first_hit - _WINDOW_BEFORE_CHARS)
    end = min(len(quote.text), start + MAX_QUOTE_CHARS)
    # Whole words only: move inwards to the nearest spaces.
    if start > 0:
        start = quote.text.find(" ", start) + 1 or start
    space = quote.text.rfind(" ", start, end)
    if end < len(quote.text) and space > start:
        end = space
    begin = quote.start_char + start
    return replace(
        quote,
        text=quote.text[start:end],
        start_char=begin,
        end_char=quote.start_char + end,
        page=document.page_of(begin),
    )
