"""Answer a question about a document from quoted evidence, citing its pages as [p. N].

Evidence first: the passages that rank best for the question (BM25, or any PassageRanker) give
the sentences that share most of its terms (pipelines.retrieval.evidence): the quotes, those
that state what the question asks in its role first (pipelines.answer.assess.settling_first).
The prompt (pipelines.prompts.quoted_question) holds the document, then the quotes, then the question.
The model's answer is then judged by meaning (pipelines.answer.check): supported, partly
supported (what is missing in stats["support_missing"]) or not supported; when the model's text
cannot stand, the quotes that answer the question on their own are the answer, else the best
quote, labelled "(quoted from p. N)", the model's text set apart (`model_text`, and why in
stats["support_reason"]). `support` says which happened; `quotes` are what the answer rests on,
verbatim, each with its page and document offsets.

A stored key fact that matches the question is checked the same way before it answers
(a placeholder stored as a value, or a fact of another kind than asked, is set aside); a field
the facts job found nothing for answers "not found" only when no quote states what is asked.

Full document: when the page-marked document, the quotes, the question and the answer fit the
context, the document is the prompt prefix (pipelines.prompts.templates) and the task comes last, so a
second question about the same document reuses the cached KV blocks on that worker and only the
task is computed. Retrieval: otherwise the best-ranked passages (as many of the top
`num_passages` as fit) are given instead, in document order with their page markers.

Citations: the model's own "[p. N]"-style citations are kept if they name pages it was given (the
document's pages, or the retrieved passages' pages); others are dropped from `cited_pages` (the
text is left as written, and `stats["num_invalid_citations"]` counts them). When no valid
citation remains, which a small model often does, we cite for it and say so in
`citation_source`:

- "model": the model cited valid pages. Used passages: the retrieved ones (retrieval), or those
  on the cited pages (full document). A checked answer keeps only the citations of pages that
  hold the quotes it rests on (pipelines.answer.cited_pages).
- "checked": the model cited none of those pages: the pages of the quotes the check found the
  answer in are cited, in an appended "Sources:" line.
- "matched": the passages that best match question and answer by BM25 (among those retrieved, in
  retrieval mode) are cited, and a line "Sources: [p. N], ..." is appended to the answer. This
  says where the matching text is, not that the model read it there.
- "prompt": retrieval mode and nothing matched: the pages of all retrieved passages, which were
  the only text the model saw, are cited in the appended line.
- "quote": the answer is the best quote: its page is cited.
- "fact": a stored key fact answers the question (method "key_fact", no model call): the pages
  of its quotes are cited. A field the facts job found no value for answers "No governing law
  found ..." (support "no_answer"), cites nothing, and quotes the sentences closest to the
  question (pipelines.answer.from_facts).
- "none": full-document mode and nothing matched (or no answer at all): no page is cited.

The citing is pipelines.answer.citing, a stored fact's answer pipelines.answer.fact_results, and
AnswerResult pipelines.answer.result (re-exported here).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pipelines.answer.asked import asked_kind, holding_first
from pipelines.answer.assess import PARTLY_SUPPORTED, SUPPORTED, settling_first
from pipelines.answer.check import FALLBACK_STATUSES, judge_answer
from pipelines.answer.citing import MAX_MATCHED_PASSAGES as MAX_MATCHED_PASSAGES
from pipelines.answer.citing import cite_checked, cite_model, cite_quoted, pages_of
from pipelines.answer.fact_results import (
    checked_fact,
    fact_completed_by_quotes,
    not_found_from_fact,
)
from pipelines.answer.from_facts import KnownFact, fact_answer
from pipelines.answer.result import AnswerResult, support_notes
from pipelines.answer.role_search import role_quotes
from pipelines.documents import Passage
from pipelines.errors import ContextTooSmallError
from pipelines.inputs import DocumentInput
from pipelines.model_calls import CallLog, fits
from pipelines.prompts.quoted_question import quoted_question_messages, task_words
from pipelines.prompts.templates import document_block, render_pages, render_passages
from pipelines.protocols import ChatModel, Embedder
from pipelines.retrieval.bm25 import PassageIndex
from pipelines.retrieval.evidence import DocumentSentences, Evidence, sentence_evidence
from pipelines.retrieval.ranking import PassageRanker
from pipelines.sections import passage_cost

logger = logging.getLogger(__name__)

# Quotes given to the model and kept with the answer (more may be added by the check).
NUM_QUOTES = 3
# The quotes are the best NUM_QUOTES of this many times as many sentences, those that state
# what the question asks for first.
CANDIDATE_QUOTES_FACTOR = 3


def answer_question(
    document: DocumentInput,
    question: str,
    model: ChatModel,
    *,
    max_new_tokens: int = 256,
    num_passages: int = 6,
    num_quotes: int = NUM_QUOTES,
    index: PassageRanker | None = None,
    sentences: DocumentSentences | None = None,
    embedder: Embedder | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_tokens: Callable[[int, int], None] | None = None,
    facts: Sequence[KnownFact] = (),
    fact_embedder: Embedder | None = None,
) -> AnswerResult:
    """Answer `question` from `document`; see the module docstring for modes and citations.

    `index` ranks `document.passages` (a PassageIndex, built on demand, or any PassageRanker);
    `sentences` is the document split into sentences, for callers that keep one per document.
    `embedder` (the one that made the passage vectors) ranks the quoted sentences by meaning
    too. `on_progress` gets the model's prefill progress in tokens, `on_tokens` the tokens it
    has written of the most it may write. `facts`: the document's stored key facts; a question
    one of them answers gets it (pipelines.answer.from_facts), with no model call; `fact_embedder`
    (or else `embedder`) compares the question with the facts'.
    """
    if not question.strip():
        raise ValueError("the question is empty")
    if max_new_tokens < 1 or num_passages < 1 or num_quotes < 1:
        raise ValueError("max_new_tokens, num_passages and num_quotes must be at least 1")
    calls = CallLog(model)
    ranker = index if index is not None else PassageIndex(document.passages)
    sentences = sentences if sentences is not None else DocumentSentences(document.pages)
    from_fact = fact_answer(
        question, facts, sentences, document.passages, embedder=fact_embedder or embedder
    )
    # A fact that settles only part of the question ("when was it argued, and when decided"
    # and the decision date) stands unless the model's answer, checked, settles all of it.
    partly_by_fact: AnswerResult | None = None
    if from_fact is not None and from_fact.found:
        checked = checked_fact(question, from_fact, sentences)
        if checked is not None and checked.support != PARTLY_SUPPORTED:
            return checked
        partly_by_fact = checked
    ranked = ranker.rank(question, num_passages)
    # The sentences that state what the question asks for in its role (the governing-law
    # clause, the caption: pipelines.answer.assess) come first, then those that state a thing
    # of its kind at all (a place, a date: pipelines.answer.asked), so the model reads them
    # and the fallback quotes one.
    candidates = sentence_evidence(
        ranked, question, sentences, k=num_quotes * CANDIDATE_QUOTES_FACTOR, embedder=embedder
    )
    candidates = holding_first(candidates, asked_kind(question))
    quotes = [candidates[i] for i in settling_first(candidates, question)][:num_quotes]
    # What the question asks in its role, from the opening or the end, when no quote has it.
    found = role_quotes(question, quotes, sentences, document.passages)
    if found:
        taken = {(q.start_char, q.end_char) for q in found}
        rest = [q for q in quotes if (q.start_char, q.end_char) not in taken]
        quotes = found + rest[: max(num_quotes - len(found), 1)]
    if from_fact is not None and not from_fact.found:
        return not_found_from_fact(from_fact, quotes, question)
    if partly_by_fact is not None:
        completed = fact_completed_by_quotes(question, partly_by_fact, quotes, sentences)
        if completed is not None:
            return completed
    messages = quoted_question_messages(
        document_block(document.title, render_pages(document.pages)), quotes, question
    )
    retrieved: list[Passage] | None = None
    if fits(model, messages, max_new_tokens):
        method = "full_document"
        allowed = set(document.page_numbers)
    else:
        method = "retrieval"
        retrieved, messages = _retrieve(document, question, quotes, model, ranked, max_new_tokens)
        allowed = {page for passage in retrieved for page in pages_of(passage)}
    # A list of independent prompts, run one by one: ChatModel.complete_many can take it whole.
    prompts = [messages]
    outputs = [
        calls.run(
            "answer",
            prompt,
            max_new_tokens=max_new_tokens,
            on_progress=on_progress,
            on_tokens=on_tokens,
        )
        for prompt in prompts
    ]
    verdict = judge_answer(
        outputs[0],
        quotes,
        sentences,
        document.passages,
        question=question,
        echo_of=task_words(question),
    )
    stats = calls.stats()
    if verdict.by_quote or verdict.status in FALLBACK_STATUSES:
        text, cited, used, source, num_invalid = cite_quoted(verdict, retrieved)
    elif verdict.support_pages:
        text, cited, used, source, num_invalid = cite_checked(verdict, allowed, retrieved)
    else:
        text, cited, used, source, num_invalid = cite_model(
            document, question, verdict.text, allowed, retrieved, ranker
        )
    stats["num_invalid_citations"] = num_invalid
    stats["num_passages_in_prompt"] = len(retrieved) if retrieved is not None else None
    stats |= {
        "support": verdict.status,
        "num_quotes": len(verdict.quotes),
        "num_claims": verdict.num_claims,
        "num_unsupported_claims": len(verdict.unsupported_claims),
        "answer_loop_cut": verdict.loop_cut,
        "num_prompt_sentences_dropped": verdict.num_prompt_sentences_dropped,
    } | support_notes(verdict.missing, verdict.reason)
    if partly_by_fact is not None and verdict.status != SUPPORTED:
        logger.info(
            "answer done: method=key_fact (partly; the model's answer was %s)", verdict.status
        )
        return partly_by_fact
    logger.info(
        "answer done: method=%s support=%s citation_source=%s cited_pages=%d quotes=%d",
        method, verdict.status, source, len(cited), len(verdict.quotes),
    )  # fmt: skip
    return AnswerResult(
        text=text,
        method=method,
        cited_pages=cited,
        used_passage_ordinals=used,
        stats=stats,
        citation_source=source,
        quotes=verdict.quotes,
        support=verdict.status,
        model_text=verdict.model_text,
        unsupported_claims=verdict.unsupported_claims,
    )


def _retrieve(
    document: DocumentInput,
    question: str,
    quotes: Sequence[Evidence],
    model: ChatModel,
    ranked: Sequence[tuple[Passage, float]],
    max_new_tokens: int,
) -> tuple[list[Passage], list[dict[str, str]]]:
    """The best-ranked passages whose prompt (with the quotes) fits, and that prompt."""
    chosen = [passage for passage, score in ranked if score > 0]
    if not chosen:
        # No question word occurs in the text: fall back to the start of the ranking.
        chosen = [passage for passage, _ in ranked]
    empty = quoted_question_messages(document_block(document.title, ""), quotes, question)
    budget = model.max_context_tokens - max_new_tokens - model.count_chat_tokens(empty)
    kept, used = [], 0
    for passage in chosen:
        if used + passage_cost(passage) > budget:
            break
        kept.append(passage)
        used += passage_cost(passage)
    chosen = kept
    while chosen:
        block = document_block(document.title, render_passages(document.pages, chosen))
        messages = quoted_question_messages(block, quotes, question)
        if fits(model, messages, max_new_tokens):
            return chosen, messages
        chosen = chosen[:-1]
    raise ContextTooSmallError(
        f"The model's context of {model.max_context_tokens} tokens cannot hold even one passage "
        "of this document with the question and room for the answer."
    )
