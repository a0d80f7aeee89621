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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.answer.asked import asked_kind, holding_first
from pipelines.answer.assess import (
    PARTLY_SUPPORTED,
    QUOTED,
    SUPPORTED,
    answer_by_quotes,
    assess,
    settling_first,
)
from pipelines.answer.check import (
    FALLBACK_STATUSES,
    NO_ANSWER,
    UNSUPPORTED,
    Verdict,
    judge_answer,
    quoted_answer,
    verdict_from_quotes,
)
from pipelines.answer.cited_pages import checked_citations
from pipelines.answer.from_facts import FactAnswer, KnownFact, fact_answer, not_found_text
from pipelines.answer.role_search import role_quotes
from pipelines.citations import citation_line, keep_pages, parse_citations
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

# When we cite for the model: at most this many best-matching passages.
MAX_MATCHED_PASSAGES = 2
# Quotes given to the model and kept with the answer (more may be added by the check).
NUM_QUOTES = 3
# The quotes are the best NUM_QUOTES of this many times as many sentences, those that state
# what the question asks for first.
CANDIDATE_QUOTES_FACTOR = 3


@dataclass(frozen=True)
class AnswerResult:
    text: str
    method: str  # "full_document" | "retrieval"
    cited_pages: list[int]
    used_passage_ordinals: list[int]
    stats: dict[str, Any]
    citation_source: str = "model"  # "model" | "checked" | "matched" | "prompt" | "quote" | "none"
    quotes: list[Evidence] = field(default_factory=list)
    # pipelines.answer.check: "supported" | "partly_supported" | "unsupported" | "quoted" |
    # "no_answer" ("unchecked" only on answers saved before the meaning check)
    support: str = "unchecked"
    model_text: str | None = None  # the model's own answer, when the best quote replaced it
    unsupported_claims: list[str] = field(default_factory=list)


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
        checked = _checked_fact(question, from_fact, sentences)
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
        return _not_found_from_fact(from_fact, quotes, question)
    if partly_by_fact is not None:
        completed = _fact_completed_by_quotes(question, partly_by_fact, quotes, sentences)
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
        allowed = {page for passage in retrieved for page in _pages_of(passage)}
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
        text, cited, used, source, num_invalid = _quoted(verdict, retrieved)
    elif verdict.support_pages:
        text, cited, used, source, num_invalid = _checked(verdict, allowed, retrieved)
    else:
        text, cited, used, source, num_invalid = _cited(
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
    } | _support_notes(verdict.missing, verdict.reason)
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


def _support_notes(missing: str, reason: str) -> dict[str, str]:
    """What a partly supported answer lacks, and why the model's text was set apart: stored in
    the answer's stats (app.services.answer_labels reads them)."""
    notes = {"support_missing": missing, "support_reason": reason}
    return {key: value for key, value in notes.items() if value}


def _checked_fact(
    question: str, answer: FactAnswer, sentences: DocumentSentences
) -> AnswerResult | None:
    """The stored fact as the answer, if it answers the question as the support check reads
    it (supported, or partly: "Parties: A v. B" for "who are the parties and what did the court
    decide"); None when it does not (a placeholder stored as a court's name, a court for a
    question about the holding): then the question is answered as if no fact matched."""
    verdict = assess(question, answer.text, answer.quotes, document=sentences.text)
    if verdict.status in (UNSUPPORTED, QUOTED):
        logger.info("key fact set aside: field=%s support=%s", answer.fact.field, verdict.status)
        return None
    quotes = answer.quotes
    stats = {
        "support": verdict.status,
        "key_fact": answer.fact.field,
        "key_fact_similarity": round(answer.similarity, 3),
        "num_quotes": len(quotes),
        "num_calls": 0,
    } | _support_notes(verdict.note, "")
    logger.info("answer done: method=key_fact quotes=%d", len(quotes))
    return AnswerResult(
        text=answer.text,
        method="key_fact",
        cited_pages=sorted({quote.page for quote in quotes}),
        used_passage_ordinals=sorted({quote.passage_ordinal for quote in quotes}),
        stats=stats,
        citation_source="fact",
        quotes=quotes,
        support=verdict.status,
    )


def _fact_completed_by_quotes(
    question: str, by_fact: AnswerResult, quotes: Sequence[Evidence], sentences: DocumentSentences
) -> AnswerResult | None:
    """A fact that settles part of the question, with the quotes that settle the rest: "Date:
    June 13, 2013" and the syllabus's "Argued April 23, 2013" for "when was it argued, and when
    decided?". Only when the two together settle every part (the support check reads them as
    one answer); None otherwise, and the fact stands alone as partly supported."""
    taken = {(q.start_char, q.end_char) for q in by_fact.quotes}
    # The fact's own quote may say the rest ("Argued April 23, 2013—Decided June 13, 2013").
    read = list(by_fact.quotes) + [q for q in quotes if (q.start_char, q.end_char) not in taken]
    by_quotes = answer_by_quotes(question, read)
    if by_quotes is None:
        return None
    chosen = [read[i] for i in by_quotes.quotes]
    text = "\n".join([by_fact.text, *(quoted_answer(quote) for quote in chosen)])
    together = list(by_fact.quotes) + [q for q in chosen if q not in by_fact.quotes]
    # Read as the fact and the quotes' own words (their "quoted from p. N" labels are no claim).
    said = "\n".join([by_fact.text, *(f"“{quote.text}”" for quote in chosen)])
    verdict = assess(question, said, together, document=sentences.text)
    if verdict.status != SUPPORTED:
        return None
    logger.info("answer done: method=key_fact completed by quotes=%d", len(chosen))
    stats = {key: value for key, value in by_fact.stats.items() if not key.startswith("support")}
    return AnswerResult(
        text=text,
        method="key_fact",
        cited_pages=sorted({quote.page for quote in together}),
        used_passage_ordinals=sorted({quote.passage_ordinal for quote in together}),
        stats=stats | {"support": SUPPORTED, "num_quotes": len(together)},
        citation_source="fact",
        quotes=together,
        support=SUPPORTED,
    )


def _not_found_from_fact(answer: FactAnswer, quotes: list[Evidence], question: str) -> AnswerResult:
    """The facts job found no value for the field the question asks: say so, with the closest
    quotes (a redacted clause shows here), citing nothing, as the answer claims nothing.
    Unless a quote states what the question asks in its role: then that quote is the answer
    ("not found" is only for when nothing that answers was found)."""
    by_quotes = verdict_from_quotes(question, quotes)
    if by_quotes is not None:
        text, cited, used, _, _ = _quoted(by_quotes, None)
        stats = {
            "support": by_quotes.status,
            "key_fact": answer.fact.field,
            "key_fact_missing": True,
            "num_quotes": len(by_quotes.quotes),
            "num_calls": 0,
        } | _support_notes(by_quotes.missing, "")
        return AnswerResult(
            text=text,
            method="key_fact",
            cited_pages=cited,
            used_passage_ordinals=used,
            stats=stats,
            citation_source="quote",
            quotes=by_quotes.quotes,
            support=by_quotes.status,
        )
    stats = {
        "support": NO_ANSWER,
        "key_fact": answer.fact.field,
        "key_fact_similarity": round(answer.similarity, 3),
        "key_fact_missing": True,
        "num_quotes": len(quotes),
        "num_calls": 0,
    }
    logger.info("answer done: method=key_fact missing quotes=%d", len(quotes))
    return AnswerResult(
        text=not_found_text(answer.fact.label, num_quotes=len(quotes)),
        method="key_fact",
        cited_pages=[],
        used_passage_ordinals=sorted({quote.passage_ordinal for quote in quotes}),
        stats=stats,
        citation_source="fact",
        quotes=quotes,
        support=NO_ANSWER,
    )


def _quoted(
    verdict: Verdict, retrieved: list[Passage] | None
) -> tuple[str, list[int], list[int], str, int]:
    """Quotes stand as the answer: their pages are the citations, their passages the ones used
    (the best quote's, or those of the quotes that answer: Verdict.support_pages)."""
    if not verdict.quotes or not verdict.by_quote:
        return verdict.text, [], [], "none", 0
    pages = list(verdict.support_pages) or [verdict.quotes[0].page]
    shown = [q for q in verdict.quotes if q.page in pages][: max(1, len(pages))]
    return verdict.text, sorted(pages), sorted({q.passage_ordinal for q in shown}), "quote", 0


def _checked(
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


def _cited(
    document: DocumentInput,
    question: str,
    text: str,
    allowed: set[int],
    retrieved: list[Passage] | None,
    ranker: PassageRanker,
) -> tuple[str, list[int], list[int], str, int]:
    """The model's answer with its valid citations, or ours when it gave none (module doc)."""
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
        cited = sorted({page for passage in picked for page in _pages_of(passage)})
        if cited:
            text = f"{text}\n\n{citation_line(cited)}"
    return text, cited, sorted(passage.ordinal for passage in used), source, num_invalid


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


def _pages_of(passage: Passage) -> range:
    return range(passage.first_page, passage.last_page + 1)


def _on_pages(passages: Sequence[Passage], pages: Sequence[int]) -> list[Passage]:
    wanted = set(pages)
    return [p for p in passages if any(page in wanted for page in _pages_of(p))]


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
