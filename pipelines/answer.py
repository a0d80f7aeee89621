"""Answer a question about a document, citing its pages as [p. N].

Full document: when the page-marked document, the question and the answer fit the context, the
document is the prompt prefix (pipelines.prompts) and the question comes last, so a second
question about the same document reuses the cached KV blocks on that worker and only the question
is computed. Retrieval: otherwise the passages that match the question best by BM25 (as many of
the top `num_passages` as fit) are given instead, in document order with their page markers.

Citations: the model's own "[p. N]"-style citations are kept if they name pages it was given (the
document's pages, or the retrieved passages' pages); others are dropped from `cited_pages` (the
text is left as written, and `stats["num_invalid_citations"]` counts them). When no valid
citation remains, which a small model often does, we cite for it and say so in
`citation_source`:

- "model": the model cited valid pages. Used passages: the retrieved ones (retrieval), or those
  on the cited pages (full document).
- "matched": the passages that best match question and answer by BM25 (among those retrieved, in
  retrieval mode) are cited, and a line "Sources: [p. N], ..." is appended to the answer. This
  says where the matching text is, not that the model read it there.
- "prompt": retrieval mode and nothing matched: the pages of all retrieved passages, which were
  the only text the model saw, are cited in the appended line.
- "none": full-document mode and nothing matched (or the answer is empty): no page is cited.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.citations import citation_line, keep_pages, parse_citations
from pipelines.documents import Passage
from pipelines.errors import ContextTooSmallError
from pipelines.inputs import DocumentInput
from pipelines.model_calls import CallLog, fits
from pipelines.prompts import document_block, question_messages, render_pages, render_passages
from pipelines.protocols import ChatModel
from pipelines.retrieve import PassageIndex
from pipelines.sections import passage_cost

logger = logging.getLogger(__name__)

# When we cite for the model: at most this many best-matching passages.
MAX_MATCHED_PASSAGES = 2


@dataclass(frozen=True)
class AnswerResult:
    text: str
    method: str  # "full_document" | "retrieval"
    cited_pages: list[int]
    used_passage_ordinals: list[int]
    stats: dict[str, Any]
    citation_source: str = "model"  # "model" | "matched" | "prompt" | "none"


def answer_question(
    document: DocumentInput,
    question: str,
    model: ChatModel,
    *,
    max_new_tokens: int = 256,
    num_passages: int = 6,
    index: PassageIndex | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> AnswerResult:
    """Answer `question` from `document`; see the module docstring for modes and citations.

    `index` is a BM25 index over `document.passages`, for callers that keep one per document;
    it is built on demand otherwise. `on_progress` gets the model's prefill progress in tokens.
    """
    if not question.strip():
        raise ValueError("the question is empty")
    if max_new_tokens < 1 or num_passages < 1:
        raise ValueError("max_new_tokens and num_passages must be at least 1")
    calls = CallLog(model)
    messages = question_messages(
        document_block(document.title, render_pages(document.pages)), question
    )
    retrieved: list[Passage] | None = None
    if fits(model, messages, max_new_tokens):
        method = "full_document"
        allowed = set(document.page_numbers)
    else:
        method = "retrieval"
        index = index if index is not None else PassageIndex(document.passages)
        retrieved, messages = _retrieve(
            document, question, model, index, max_new_tokens, num_passages
        )
        allowed = {page for passage in retrieved for page in _pages_of(passage)}
    text = calls.run("answer", messages, max_new_tokens=max_new_tokens, on_progress=on_progress)
    text = text.strip()
    parsed = parse_citations(text)
    cited = keep_pages(parsed, allowed)
    source = "model"
    if cited:
        used = retrieved if retrieved is not None else _on_pages(document.passages, cited)
    else:
        candidates = retrieved if retrieved is not None else list(document.passages)
        index = index if index is not None else PassageIndex(document.passages)
        matched = _best_matching(index, candidates, question, text)
        if matched:
            source, picked = "matched", matched
        elif retrieved is not None:
            source, picked = "prompt", retrieved
        else:
            source, picked = "none", []
        used = retrieved if retrieved is not None else picked
        cited = sorted({page for passage in picked for page in _pages_of(passage)})
        if cited:
            text = f"{text}\n\n{citation_line(cited)}"
    stats = calls.stats()
    stats["num_invalid_citations"] = len(parsed) - len(keep_pages(parsed, allowed))
    stats["num_passages_in_prompt"] = len(retrieved) if retrieved is not None else None
    logger.info(
        "answer done: method=%s citation_source=%s cited_pages=%d", method, source, len(cited)
    )
    return AnswerResult(
        text=text,
        method=method,
        cited_pages=cited,
        used_passage_ordinals=sorted(passage.ordinal for passage in used),
        stats=stats,
        citation_source=source,
    )


def _retrieve(
    document: DocumentInput,
    question: str,
    model: ChatModel,
    index: PassageIndex,
    max_new_tokens: int,
    num_passages: int,
) -> tuple[list[Passage], list[dict[str, str]]]:
    """The best-ranked passages (up to `num_passages`) whose prompt fits, and that prompt."""
    ranked = index.rank(question)
    chosen = [passage for passage, score in ranked if score > 0][:num_passages]
    if not chosen:
        # No question word occurs in the text: fall back to the start of the document.
        chosen = [passage for passage, _ in ranked[:num_passages]]
    empty = question_messages(document_block(document.title, ""), question)
    budget = model.max_context_tokens - max_new_tokens - model.count_chat_tokens(empty)
    kept, used = [], 0
    for passage in chosen:
        if used + passage_cost(passage) > budget:
            break
        kept.append(passage)
        used += passage_cost(passage)
    chosen = kept
    while chosen:
        messages = question_messages(
            document_block(document.title, render_passages(document.pages, chosen)), question
        )
        if fits(model, messages, max_new_tokens):
            return chosen, messages
        chosen = chosen[:-1]
    raise ContextTooSmallError(
        f"The model's context of {model.max_context_tokens} tokens cannot hold even one passage "
        "of this document with the question and room for the answer."
    )


def _pages_of(passage: Passage) -> range:
    return range(passage.first_page, passage.last_page + 1)


def _on_pages(passages: Sequence[Passage], pages: Sequence[int]) -> list[Passage]:
    wanted = set(pages)
    return [p for p in passages if any(page in wanted for page in _pages_of(p))]


def _best_matching(
    index: PassageIndex, candidates: Sequence[Passage], question: str, answer: str
) -> list[Passage]:
    """Up to MAX_MATCHED_PASSAGES of `candidates` matching question and answer, best first."""
    if not answer or not candidates:
        return []
    allowed = {passage.ordinal for passage in candidates}
    best = []
    for passage, score in index.rank(f"{question}\n{answer}"):
        if score <= 0:
            break
        if passage.ordinal in allowed:
            best.append(passage)
            if len(best) == MAX_MATCHED_PASSAGES:
                break
    return best
