"""Evidence for a sentence the caller picked (not ranked for a query): a key passage, or the
sentence of the document that holds a claim of an answer."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from pipelines.documents import Passage
from pipelines.retrieval.evidence import DocumentSentences, Evidence


def passage_at(passages: Sequence[Passage], offset: int) -> int:
    """The ordinal of the passage that holds document offset `offset` (the one before it, in a
    gap between passages); -1 when there are no passages."""
    if not passages:
        return -1
    starts = [passage.start_char for passage in passages]
    index = max(0, bisect.bisect_right(starts, offset) - 1)
    return passages[index].ordinal


def sentence_quote(
    sentences: DocumentSentences,
    passages: Sequence[Passage],
    span: tuple[int, int],
    score: float = 0.0,
) -> Evidence:
    """The sentence at `span` of the document, verbatim, with its page and passage."""
    start, end = span
    return Evidence(
        text=sentences.text[start:end],
        page=sentences.page_of(start),
        passage_ordinal=passage_at(passages, start),
        start_char=start,
        end_char=end,
        score=score,
    )
