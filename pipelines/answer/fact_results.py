"""A stored key fact as the answer to a question (pipelines.answer.question): checked by the
support check, completed by quotes when it settles only part of the question, or "not found"
when the facts job found no value for the field asked."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pipelines.answer.assess import QUOTED, SUPPORTED, answer_by_quotes, assess
from pipelines.answer.check import NO_ANSWER, UNSUPPORTED, quoted_answer, verdict_from_quotes
from pipelines.answer.citing import cite_quoted
from pipelines.answer.from_facts import FactAnswer, not_found_text
from pipelines.answer.result import AnswerResult, support_notes
from pipelines.retrieval.evidence import DocumentSentences, Evidence

logger = logging.getLogger(__name__)


def checked_fact(
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
    } | support_notes(verdict.note, "")
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


def fact_completed_by_quotes(
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


def not_found_from_fact(answer: FactAnswer, quotes: list[Evidence], question: str) -> AnswerResult:
    """The facts job found no value for the field the question asks: say so, with the closest
    quotes (a redacted clause shows here), citing nothing, as the answer claims nothing.
    Unless a quote states what the question asks in its role: then that quote is the answer
    ("not found" is only for when nothing that answers was found)."""
    by_quotes = verdict_from_quotes(question, quotes)
    if by_quotes is not None:
        text, cited, used, _, _ = cite_quoted(by_quotes, None)
        stats = {
            "support": by_quotes.status,
            "key_fact": answer.fact.field,
            "key_fact_missing": True,
            "num_quotes": len(by_quotes.quotes),
            "num_calls": 0,
        } | support_notes(by_quotes.missing, "")
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
