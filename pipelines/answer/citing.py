"""How an answer's pages are cited (the "Citations:" part of pipelines.answer.question's
docstring): by its quotes, by the model's citations checked against the quotes' pages, or by the
model's own citations, else the passages that best match question and answer.

Each returns (text, cited pages, used passage ordinals, citation_source, number of citations
dropped or invalid)."""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.answer.check import Verdict
from pipelines.answer.cited_pages import checked_citations
from pipelines.citations import citation_line, keep_pages, parse_citations
from pipelines.documents import Passage
from pipelines.inputs import DocumentInput
from pipelines.retrieval.ranking import PassageRanker

# When we cite for the model: at most this many best-matching passages.
MAX_MATCHED_PASSAGES = 2


def cite_quoted(
    verdict: Verdict, retrieved: list[Passage] | None
) -> tuple[str, list[int], list[int], str, int]:
    """Quotes stand as the answer: their pages are the citations, their passages the ones used
    (the best quote's, or those of the quotes that answer: Verdict.support_pages)."""
    if not verdict.quotes or not verdict.by_quote:
        return verdict.text, [], [], "none", 0
    pages = list(verdict.support_pages) or [verdict.quotes[0].page]
    shown = [q for q in verdict.quotes if q.page in pages][: max(1, len(pages))]
    return verdict.text, sorted(pages), sorted({q.passage_ordinal for q in shown}), "quote", 0


def cite_checked(
    verdict: Verdict, allowed: set[int], retrieved: list[Passage] | None
) -> tuple[str, list[int], list[int], str, int]:
    """The model's answer, its citations checked against the pages of the quotes it rests on
    (pipelines.answer.cited_pages): a page that does not hold them is dropped, and their
    pages are cited when none of the model's remains."""
    support = [page for page in verdict.support_pages if page in allowed] or list(
        verdict.support_pages
    )
    text, cited, num_dropped, by_model = checked_citations(verdict.text, support)
    used_quotes = [q for q in verdict.quotes if q.page in set(cited)]
    used = (
        sorted(p.ordinal for p in retrieved)
        if retrieved is not None
        else sorted({q.passage_ordinal for q in used_quotes})
    )
    return text, cited, used, "model" if by_model else "checked", num_dropped


def cite_model(
    document: DocumentInput,
    question: str,
    text: str,
    allowed: set[int],
    retrieved: list[Passage] | None,
    ranker: PassageRanker,
) -> tuple[str, list[int], list[int], str, int]:
    """The model's answer with its valid citations, or ours when it gave none
    (pipelines.answer.question's docstring)."""
    parsed = parse_citations(text)
    cited = keep_pages(parsed, allowed)
    num_invalid = len(parsed) - len(cited)
    source = "model"
    if cited:
        used = retrieved if retrieved is not None else _on_pages(document.passages, cited)
    else:
        candidates = retrieved if retrieved is not None else list(document.passages)
        matched = _best_matching(ranker, candidates, question, text)
        if matched:
            source, picked = "matched", matched
        elif retrieved is not None:
            source, picked = "prompt", retrieved
        else:
            source, picked = "none", []
        used = retrieved if retrieved is not None else picked
        cited = sorted({page for passage in picked for page in pages_of(passage)})
        if cited:
            text = f"{text}\n\n{citation_line(cited)}"
    return text, cited, sorted(passage.ordinal for passage in used), source, num_invalid


def pages_of(passage: Passage) -> range:
    return range(passage.first_page, passage.last_page + 1)


def _on_pages(passages: Sequence[Passage], pages: Sequence[int]) -> list[Passage]:
    wanted = set(pages)
    return [p for p in passages if any(page in wanted for page in pages_of(p))]


def _best_matching(
    ranker: PassageRanker, candidates: Sequence[Passage], question: str, answer: str
) -> list[Passage]:
    """Up to MAX_MATCHED_PASSAGES of `candidates` matching question and answer, best first."""
    if not answer or not candidates:
        return []
    allowed = {passage.ordinal for passage in candidates}
    best = []
    for passage, score in ranker.rank(f"{question}\n{answer}"):
        if score <= 0:
            break
        if passage.ordinal in allowed:
            best.append(passage)
            if len(best) == MAX_MATCHED_PASSAGES:
                break
    return best
