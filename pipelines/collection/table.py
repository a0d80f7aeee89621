"""Answer a question about every document of a collection, document by document, as a table
(document, answer, quote, page).

A document whose key facts already answer the question (a stored fact whose label's words are
all in the question: pipelines.answer.from_facts.fact_for) gets the fact's value and quote,
with no model call. Every other document gets a short prompt of its own: the sentences that
match the question best (from its best passages), each with CONTEXT_SENTENCES of its neighbours
on either side, page-marked, then those sentences quoted and the question
(pipelines.prompts.quoted_question, as for one document). A cell needs the clause, not the passages
around it: the excerpts are a third of the passages' tokens, and the prefill of 50 prompts is
most of the job's time on a CPU (bench/results/collection_question.md). All those
prompts go to the model in ONE ChatModel.complete_many call, which the engine batches. Each
answer, its sentences that repeat the prompt dropped (pipelines.prompts.echo), is checked as a
one-document answer is (pipelines.answer.check.judge_answer); when it
falls back, the row's answer is the best quote. A model that follows a JSON schema (a model
server's structured output) answers each document as a row of
pipelines.collection.table_reply.ROW_SCHEMA (answer, page, quote); its quote counts only once
the document holds it verbatim, and the answer is checked the same way.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.answer.check import FALLBACK_STATUSES, NO_ANSWER, judge_answer
from pipelines.answer.from_facts import fact_for
from pipelines.collection.answer import CollectionResult
from pipelines.collection.sources import CitedPage, SourceDocument, SourceQuote
from pipelines.collection.table_reply import ROW_SCHEMA, check_quote, judged_inputs, row_from_reply
from pipelines.model_calls import CallLog, fits
from pipelines.prompts.echo import drop_prompt_sentences
from pipelines.prompts.quoted_question import quoted_question_messages, task_words
from pipelines.prompts.templates import GAP_MARKER, document_block, render_span
from pipelines.protocols import ChatModel, Embedder
from pipelines.retrieval.bm25 import PassageIndex
from pipelines.retrieval.evidence import DocumentSentences, Evidence, sentence_evidence

logger = logging.getLogger(__name__)

# Per document: its best passages searched for this many quotes, each shown with this many
# sentences on either side. Small on purpose: 50 documents' prompts are prefilled in one batch
# on a CPU.
NUM_PASSAGES = 3
NUM_QUOTES = 2
CONTEXT_SENTENCES = 1
NOT_FOUND = "Not found in this document."
FACT, MODEL, QUOTE, NONE = "fact", "model", "quote", "none"


@dataclass(frozen=True)
class DocumentRow:
    document_id: int
    label: str
    answer: str
    quote: str
    page: int | None
    source: str  # FACT, MODEL (checked), QUOTE (the model's answer fell back), NONE
    support: str | None = None


def answer_each(
    question: str,
    documents: Sequence[SourceDocument],
    model: ChatModel,
    *,
    max_new_tokens: int = 96,
    embedder: Embedder | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> CollectionResult:
    """One row per document, in the order given; see the module docstring."""
    if not question.strip():
        raise ValueError("the question is empty")
    rows: dict[int, DocumentRow] = {}
    asked: list[tuple[SourceDocument, list, list[dict[str, str]]]] = []
    for source in documents:
        fact = fact_for(question, source.facts)
        if fact is not None:
            rows[source.document_id] = DocumentRow(
                source.document_id, source.label, fact.value, fact.quote, fact.page, FACT
            )
            continue
        ranker = source.index or PassageIndex(source.document.passages)
        ranked = ranker.rank(question, NUM_PASSAGES)
        quotes = sentence_evidence(
            ranked, question, source.sentences, k=NUM_QUOTES, embedder=embedder
        )
        if not quotes:
            rows[source.document_id] = DocumentRow(
                source.document_id, source.label, NOT_FOUND, "", None, NONE, NO_ANSWER
            )
            continue
        asked.append((source, quotes, _messages(source, quotes, question, model)))
    calls = CallLog(model)
    outputs = calls.run_many(
        "answer",
        [m for _, _, m in asked],
        max_new_tokens=max_new_tokens,
        on_progress=on_progress,
        response_schema=ROW_SCHEMA,
    )
    num_echoes = num_json = num_made_up = 0
    for (source, quotes, _), output in zip(asked, outputs, strict=True):
        # A reply as JSON of ROW_SCHEMA (pipelines.collection.table_reply), or plain text.
        row = row_from_reply(output)
        # A sentence that repeats the prompt is no part of the answer (pipelines.prompts.echo).
        written, dropped = drop_prompt_sentences(
            output if row is None else row.answer, document=source.sentences.text
        )
        num_echoes += dropped
        judged, given = written, list(quotes)
        if row is not None:
            check = check_quote(row.quote, source.sentences, quotes)
            judged, given = judged_inputs(row, written, check, quotes)
            num_json += 1
            num_made_up += bool(check and check.is_made_up)
        verdict = judge_answer(
            judged,
            given,
            source.sentences,
            source.document.passages,
            question=question,
            echo_of=task_words(question),
        )
        best = verdict.quotes[0] if verdict.quotes else given[0]
        is_fallback = verdict.by_quote or verdict.status in FALLBACK_STATUSES
        rows[source.document_id] = DocumentRow(
            source.document_id,
            source.label,
            " ".join(best.text.split()) if is_fallback else verdict.text,
            " ".join(best.text.split()),
            best.page,
            QUOTE if is_fallback else MODEL,
            verdict.status,
        )
    ordered = [rows[source.document_id] for source in documents]
    stats = calls.stats()
    num_facts = sum(row.source == FACT for row in ordered)
    stats |= {
        "num_documents": len(ordered),
        "num_from_facts": num_facts,
        "num_asked": len(asked),
        "num_prompt_sentences_dropped": num_echoes,
        # Replies that came as JSON of ROW_SCHEMA (a model server's structured output), and
        # those whose quote the document does not hold (judged as made up).
        "num_json_replies": num_json,
        "num_quotes_not_in_document": num_made_up,
    }
    logger.info(
        "collection table done: documents=%d from_facts=%d asked=%d",
        len(ordered), num_facts, len(asked),
    )  # fmt: skip
    found = [row for row in ordered if row.source != NONE]
    text = (
        f"Answered document by document: {len(found)} of {len(ordered)} documents have a "
        f"passage that bears on it ({num_facts} from their key facts)."
    )
    return CollectionResult(
        text=text,
        mode="per_document",
        citations=[CitedPage(r.document_id, r.label, r.page) for r in found if r.page],
        quotes=[
            SourceQuote(source.document_id, source.label, quote)
            for source, quotes, _ in asked
            for quote in quotes[:1]
        ],
        support=None,
        stats=stats,
        rows=ordered,
    )


def _messages(source, quotes, question, model) -> list[dict[str, str]]:
    """The quotes with their neighbouring sentences, page-marked; the quotes; the question."""
    block = document_block(source.label, around_quotes(source.sentences, quotes))
    messages = quoted_question_messages(block, quotes, question)
    if fits(model, messages, 128):
        return messages
    return quoted_question_messages(document_block(source.label, ""), quotes, question)


def around_quotes(sentences: DocumentSentences, quotes: Sequence[Evidence]) -> str:
    """The quoted sentences, each with CONTEXT_SENTENCES on either side, in document order,
    touching ones merged, page-marked, gaps shown (as pipelines.prompts.templates.render_passages)."""
    starts = [start for start, _ in sentences.spans]
    if not starts:
        return ""
    spans: list[list[int]] = []
    for quote in sorted(quotes, key=lambda q: (q.start_char, q.end_char)):
        first = max(0, bisect.bisect_right(starts, quote.start_char) - 1 - CONTEXT_SENTENCES)
        last = min(
            len(starts) - 1, bisect.bisect_left(starts, quote.end_char) - 1 + CONTEXT_SENTENCES
        )
        start, end = sentences.spans[first][0], sentences.spans[max(first, last)][1]
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return f"\n\n{GAP_MARKER}\n\n".join(
        render_span(sentences.pages, start, end) for start, end in spans
    )
