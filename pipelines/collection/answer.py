"""Answer a question across a collection from the passages that match it best, citing each
document and page as "[Master Services Agreement, p. 14]".

The caller ranks passages across the collection (the database's full text fused with embeddings:
pipelines.retrieval.library_ranking) and hands over the best ones with their documents. From each document
the sentences that match the question best are quoted (pipelines.retrieval.evidence); the prompt holds the
passages, document by document under page markers naming the document, then the quotes, then the
question (pipelines/prompts/collection.py). The model's sentences that repeat a prompt are
dropped first, so none is stored or shown (pipelines.prompts.echo). The answer is checked as for one document (pipelines.answer.assess, with
pipelines.answer.check's statuses): kept when supported or partly supported by the quotes
(what is missing goes in stats["support_missing"]); else the quotes that answer the question on
their own, or the best quote, stand in its place (why, in stats["support_reason"]). Citations
are the model's when they name a document and page it was given; else the quotes' documents
and pages, in a "Sources:" line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.answer.assess import PARTLY_SUPPORTED, answer_by_quotes, assess
from pipelines.answer.check import NO_ANSWER, QUOTED, SUPPORTED
from pipelines.answer.rejections import without_prompt_echo
from pipelines.citations import remove_citations
from pipelines.collection.sources import (
    CitedPage,
    SourceDocument,
    SourceQuote,
    cite,
    label_markers,
    pages_of,
    parse_source_citations,
    remove_source_citations,
    sources_line,
)
from pipelines.documents import Passage
from pipelines.errors import ContextTooSmallError
from pipelines.model_calls import CallLog, fits
from pipelines.prompts.collection import INSTRUCTIONS, NOT_STATED, SYSTEM_PROMPT, answer_messages
from pipelines.prompts.echo import drop_prompt_sentences
from pipelines.prompts.templates import render_passages
from pipelines.protocols import ChatModel, Embedder
from pipelines.repetition import before_loop
from pipelines.retrieval.evidence import sentence_evidence
from pipelines.sections import passage_cost

logger = logging.getLogger(__name__)

QUOTES_PER_DOCUMENT = 2
# The prompt's size at most, whatever the model's context: on a CPU prefill dominates (7,000
# tokens took 113 s with the default model on a loaded 2-core machine), and eight or so passages
# of several documents are what a small model can use.
MAX_PROMPT_TOKENS = 3072
MAX_QUOTES = 6
NO_ANSWER_TEXT = "No document of this collection seems to answer this: no passage matches it."


@dataclass(frozen=True)
class RankedPassage:
    document_id: int
    passage: Passage
    score: float


@dataclass(frozen=True)
class CollectionResult:
    text: str
    mode: str  # "retrieval" | "per_document"
    citations: list[CitedPage]
    quotes: list[SourceQuote]
    support: str | None
    stats: dict[str, Any]
    rows: list = field(default_factory=list)  # pipelines.collection.table.DocumentRow
    model_text: str | None = None


def answer_across(
    question: str,
    ranked: Sequence[RankedPassage],
    documents: dict[int, SourceDocument],
    model: ChatModel,
    *,
    max_new_tokens: int = 256,
    embedder: Embedder | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    max_prompt_tokens: int = MAX_PROMPT_TOKENS,
) -> CollectionResult:
    """Answer from `ranked` (best first, across documents; each passage's document is in
    `documents`), in a prompt of at most `max_prompt_tokens`. See the module docstring."""
    if not question.strip():
        raise ValueError("the question is empty")
    ranked = [r for r in ranked if r.document_id in documents]
    if not ranked:
        return CollectionResult(NO_ANSWER_TEXT, "retrieval", [], [], NO_ANSWER, {"num_calls": 0})
    quotes = _quotes(question, ranked, documents, embedder)
    chosen, messages = _prompt(
        question, ranked, documents, quotes, model, max_new_tokens, max_prompt_tokens
    )
    calls = CallLog(model)
    raw = calls.run("answer", messages, max_new_tokens=max_new_tokens, on_progress=on_progress)
    allowed = _allowed_pages(chosen, documents)
    texts = _documents_text(chosen, documents)
    # Nothing of the prompt is kept or shown, not even beside a fallback (pipelines.prompts.echo).
    written, num_echoes = drop_prompt_sentences(raw.strip(), document=texts)
    judged = _judge(question, written, quotes, chosen, documents, allowed)
    stats = calls.stats()
    stats |= {
        "num_prompt_sentences_dropped": num_echoes,
        "support": judged.status,
        "citation_source": judged.source,
        "num_invalid_citations": judged.num_invalid,
        "num_passages_in_prompt": len(chosen),
        "num_documents_in_prompt": len({r.document_id for r in chosen}),
        "num_quotes": len(quotes),
    } | judged.notes
    logger.info(
        "collection answer done: support=%s documents=%d citations=%d",
        judged.status, stats["num_documents_in_prompt"], len(judged.cited),
    )  # fmt: skip
    return CollectionResult(
        judged.text,
        "retrieval",
        judged.cited,
        quotes,
        judged.status,
        stats,
        model_text=judged.model_text,
    )


def _quotes(question, ranked, documents, embedder) -> list[SourceQuote]:
    """The best sentences of each document's ranked passages, documents in rank order."""
    by_document: dict[int, list[tuple[Passage, float]]] = {}
    for r in ranked:
        by_document.setdefault(r.document_id, []).append((r.passage, r.score))
    quotes = []
    for document_id, passages in by_document.items():
        source = documents[document_id]
        found = sentence_evidence(
            passages, question, source.sentences, k=QUOTES_PER_DOCUMENT, embedder=embedder
        )
        quotes += [SourceQuote(document_id, source.label, evidence) for evidence in found]
    return quotes[:MAX_QUOTES]


def _body(chosen: Sequence[RankedPassage], documents: dict[int, SourceDocument]) -> str:
    """Each document's chosen passages under its name, documents in rank order."""
    order: dict[int, list[Passage]] = {}
    for r in chosen:
        order.setdefault(r.document_id, []).append(r.passage)
    blocks = []
    for document_id, passages in order.items():
        source = documents[document_id]
        rendered = render_passages(source.document.pages, passages)
        blocks.append(f"Document: {source.label}\n\n{label_markers(rendered, source.label)}")
    return "\n\n".join(blocks)


def _prompt(question, ranked, documents, quotes, model, max_new_tokens, max_prompt_tokens):
    """As many of the best passages as fit with the quotes and the question, and the prompt."""
    empty = answer_messages("", quotes, question)
    context = min(model.max_context_tokens - max_new_tokens, max_prompt_tokens)
    budget = context - model.count_chat_tokens(empty)
    chosen, used = [], 0
    for r in ranked:
        cost = passage_cost(r.passage) + 16  # its document's heading and marker
        if used + cost > budget:
            break
        chosen.append(r)
        used += cost
    while chosen:
        messages = answer_messages(_body(chosen, documents), quotes, question)
        if fits(model, messages, max_new_tokens) and (
            len(chosen) == 1 or model.count_chat_tokens(messages) <= max_prompt_tokens
        ):
            return chosen, messages
        chosen = chosen[:-1]
    raise ContextTooSmallError(
        f"The model's context of {model.max_context_tokens} tokens cannot hold even one passage "
        "with the question and room for the answer."
    )


def _allowed_pages(chosen, documents) -> dict[str, tuple[int, set[int]]]:
    allowed: dict[str, tuple[int, set[int]]] = {}
    for r in chosen:
        label = documents[r.document_id].label
        allowed.setdefault(label, (r.document_id, set()))[1].update(pages_of(r.passage))
    return allowed


def _documents_text(chosen, documents) -> str:
    """The texts of the documents in the prompt, each once, in rank order."""
    document_ids = dict.fromkeys(r.document_id for r in chosen)
    return "\n\n".join(documents[document_id].sentences.text for document_id in document_ids)


@dataclass(frozen=True)
class _Quote:
    """A quote as the support check reads it. No document offsets: quotes of different
    documents must never be read as one text (pipelines.answer.roles.in_context)."""

    text: str
    page: int


@dataclass(frozen=True)
class _Judged:
    status: str
    text: str
    model_text: str | None
    cited: list[CitedPage]
    num_invalid: int
    source: str
    notes: dict[str, str]


def _judge(question, raw, quotes, chosen, documents, allowed) -> _Judged:
    """The answer as pipelines.answer.check judges one document's: the model's text when it is
    supported or partly, with its citations (else the quotes'); else the quotes that answer
    the question on their own, or the best quote."""
    usable = without_prompt_echo(before_loop(raw.strip())).strip()
    texts = {r.document_id: documents[r.document_id].sentences.text for r in chosen}
    plain = [_Quote(q.evidence.text, q.evidence.page) for q in quotes]
    reason = "The model's answer was empty or repeated itself from its first words."
    status = QUOTED
    if usable:
        claims_text = remove_citations(remove_source_citations(usable))
        prompt = " ".join((SYSTEM_PROMPT, INSTRUCTIONS, NOT_STATED, question))
        verdict = assess(
            question, claims_text, plain, document="\n\n".join(texts.values()), prompt=prompt
        )
        if verdict.status in (SUPPORTED, PARTLY_SUPPORTED):
            notes = {"support_missing": verdict.note} if verdict.note else {}
            cited, num_invalid = parse_source_citations(usable, allowed)
            if cited:
                return _Judged(verdict.status, usable, None, cited, num_invalid, "model", notes)
            cited = _quote_pages(quotes)
            text = f"{usable}\n\n{sources_line(cited)}" if cited else usable
            return _Judged(verdict.status, text, None, cited, num_invalid, "quotes", notes)
        status = NO_ANSWER if verdict.not_stated else verdict.status
        reason = verdict.note
    notes = {"support_reason": reason} if reason else {}
    if not quotes:
        return _Judged(NO_ANSWER, NO_ANSWER_TEXT, raw or None, [], 0, "none", notes)
    by_quotes = answer_by_quotes(question, plain)
    if by_quotes is not None:
        picked = [quotes[i] for i in by_quotes.quotes]
        text = "\n".join(_labelled(quote) for quote in picked)
        if by_quotes.note:
            notes["support_missing"] = by_quotes.note
        return _Judged(by_quotes.status, text, raw or None, _quote_pages(picked), 0, "quote", notes)
    best = quotes[0]
    cited = [CitedPage(best.document_id, best.label, best.evidence.page)]
    status = QUOTED if status == NO_ANSWER else status
    return _Judged(status, _labelled(best), raw or None, cited, 0, "quote", notes)


def _labelled(quote: SourceQuote) -> str:
    flat = " ".join(quote.evidence.text.split())
    return f'"{flat}" (quoted from {cite(quote.label, quote.evidence.page)})'


def _quote_pages(quotes: Sequence[SourceQuote]) -> list[CitedPage]:
    cited: list[CitedPage] = []
    for q in quotes:
        page = CitedPage(q.document_id, q.label, q.evidence.page)
        if page not in cited:
            cited.append(page)
    return cited
