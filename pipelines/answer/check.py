"""The verdict on a model's answer, stored with it: how it stands against its quotes, and what
the reader is shown (the model's text, or verbatim quotes when the model's text cannot stand).

What each status means (pipelines.answer.assess decides; the same three states everywhere):

- "supported": the answer states what the question asks, and a quote states it in that role
  (the governing-law clause names the state; the caption names the parties; the order gives
  the outcome). The answer shown is the model's text; or, when the model's text was no answer
  or not supported, the quotes that state it ("..." (quoted from p. N)), the model's text set
  apart (`model_text`) with the reason (`reason`).
- "partly_supported": a quote bears on it but does not settle it: the value is quoted but not
  in the role asked, one part of a two-part question is answered, or the answer's words are
  only partly in the quotes. `missing` says what, in a sentence.
- "unsupported" (not supported): the model's text states something the quotes do not (a
  place, date or name found nowhere, an outcome the order contradicts, a made-up quote, a
  self-contradiction), and no quote answers the question on its own: the best quote is shown
  as the answer, the model's text set apart.
- "quoted" (not supported, shown as a quote): the model gave nothing usable (empty, a loop, a
  placeholder, an echo of the question, a sentence that says nothing, no answer of the kind
  asked), and no quote answers the question on its own: the best quote is shown.
- "no_answer": nothing relevant: no quote; or the model says the document does not say and
  no quote states what the question asks for (the closest quotes are listed for the reader).
- "unchecked": answers saved before the meaning check (nothing to check then); no longer given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pipelines.answer.asked import OPEN, asked_parts
from pipelines.answer.assess import (
    PARTLY_SUPPORTED,
    QUOTED,
    SUPPORTED,
    UNSUPPORTED,
    Assessment,
    answer_by_quotes,
    assess,
)
from pipelines.answer.rejections import without_prompt_echo
from pipelines.answer.specifics import MIN_SPECIFICS, covers, held_of, specifics
from pipelines.answer.support import IN_DOCUMENT, FactIndex, check_support
from pipelines.answer.verbatim import VerbatimIndex
from pipelines.documents import Passage
from pipelines.prompts.echo import drop_prompt_sentences
from pipelines.repetition import before_loop
from pipelines.retrieval.evidence import DocumentSentences, Evidence
from pipelines.retrieval.quotes import sentence_quote

UNCHECKED, NO_ANSWER = "unchecked", "no_answer"
ALL_STATUSES = (SUPPORTED, PARTLY_SUPPORTED, UNCHECKED, UNSUPPORTED, QUOTED, NO_ANSWER)
FALLBACK_STATUSES = frozenset({UNSUPPORTED, QUOTED, NO_ANSWER})
# At most this many sentences are added to the quotes for claims only the document holds.
MAX_ADDED_QUOTES = 2
NO_ANSWER_TEXT = (
    "The document does not seem to answer this: no sentence of it matches the question, and "
    "the model gave no answer that could be checked."
)
NOT_FOUND_TEXT = (
    "No answer found: none of the passages closest to the question states what it asks for. "
    "They are quoted below, for you to check."
)
EMPTY_REASON = "The model's answer was empty or repeated itself from its first words."
ECHO_REASON = (
    "The model's answer only repeats the question or its instructions, which are left out."
)

__all__ = [
    "ALL_STATUSES",
    "FALLBACK_STATUSES",
    "NO_ANSWER",
    "PARTLY_SUPPORTED",
    "QUOTED",
    "SUPPORTED",
    "UNCHECKED",
    "UNSUPPORTED",
    "Verdict",
    "judge_answer",
    "quoted_answer",
    "verdict_from_quotes",
]


@dataclass(frozen=True)
class Verdict:
    status: str
    text: str  # the answer to show: the model's (loop cut off), or quotes, labelled
    quotes: list[Evidence]
    model_text: str | None = None  # the model's own answer, when quotes replaced it
    unsupported_claims: list[str] = field(default_factory=list)
    num_claims: int = 0
    loop_cut: bool = False
    missing: str = ""  # partly supported: what is missing, a sentence
    reason: str = ""  # why the model's text was set apart, a sentence
    support_pages: tuple[int, ...] = ()  # the pages of the quotes the answer rests on
    by_quote: bool = False  # the answer shown is quotes (from `quotes`, best first)
    num_prompt_sentences_dropped: int = 0  # sentences of the model's that repeated its prompt


def quoted_answer(quote: Evidence) -> str:
    """The best quote as the answer, labelled: "..." (quoted from p. 4)."""
    return f'"{" ".join(quote.text.split())}" (quoted from p. {quote.page})'


def judge_answer(
    model_text: str,
    quotes: Sequence[Evidence],
    sentences: DocumentSentences,
    passages: Sequence[Passage],
    *,
    question: str,
    echo_of: str | None = None,
    facts: FactIndex | None = None,
    verbatim: VerbatimIndex | None = None,
) -> Verdict:
    """Judge `model_text` as the answer to `question`; see the module docstring.

    `quotes` are expected best first (pipelines.answer.assess.settling_first). `echo_of`: the
    prompt's own words (task and question); an answer made only of them is no answer.
    `facts` and `verbatim`: the document's FactIndex and VerbatimIndex, for callers that
    judge many answers of one document.
    """
    # Nothing of the prompt is kept, judged or shown, not even beside a fallback
    # (pipelines.prompts.echo: instructions, placeholders, a facts example the document lacks).
    written, num_echoes = drop_prompt_sentences(model_text.strip(), document=sentences.text)
    verdict = _judge(
        written, quotes, sentences, passages, question, echo_of, facts, verbatim, num_echoes
    )
    return replace(verdict, num_prompt_sentences_dropped=num_echoes)


def _judge(
    model_text: str,
    quotes: Sequence[Evidence],
    sentences: DocumentSentences,
    passages: Sequence[Passage],
    question: str,
    echo_of: str | None,
    facts: FactIndex | None,
    verbatim: VerbatimIndex | None,
    num_echoes: int = 0,
) -> Verdict:
    quotes = list(quotes)
    raw = model_text
    uncut = without_prompt_echo(raw).strip()
    usable = before_loop(uncut).strip()
    loop_cut = usable != uncut
    if not usable:
        reason = ECHO_REASON if num_echoes and not uncut else EMPTY_REASON
        return _from_quotes(question, quotes, raw or None, reason, QUOTED, loop_cut)
    document = facts or sentences.text
    claims = check_support(usable, [q.text for q in quotes], document)
    offsets = [c.document_offset for c in claims.checks if c.found_in == IN_DOCUMENT]
    quotes = quotes + _sentences_at(sentences, passages, offsets, quotes)
    verdict = assess(
        question,
        usable,
        quotes,
        document=document,
        verbatim=verbatim,
        prompt=echo_of,
        claims=claims if claims.is_supported else None,
    )
    if verdict.status == PARTLY_SUPPORTED:
        # Quotes that settle the whole question say more than a partly supported answer.
        answered = verdict_from_quotes(question, quotes, model_text=raw, reason=verdict.note)
        if answered is not None and answered.status == SUPPORTED:
            return answered
    if verdict.status in (SUPPORTED, PARTLY_SUPPORTED):
        return Verdict(
            status=verdict.status,
            text=usable,
            quotes=quotes,
            num_claims=claims.num_claims,
            loop_cut=loop_cut,
            missing=verdict.note,
            support_pages=_pages(quotes, verdict),
        )
    fallback = NO_ANSWER if verdict.not_stated else verdict.status
    return _from_quotes(
        question,
        quotes,
        raw,
        verdict.note,
        fallback,
        loop_cut,
        claims=verdict.unsupported_claims,
        num_claims=claims.num_claims,
    )


def _pages(quotes: Sequence[Evidence], verdict: Assessment) -> tuple[int, ...]:
    return tuple(dict.fromkeys(quotes[i].page for i in verdict.evidence_quotes))


def _from_quotes(
    question: str,
    quotes: list[Evidence],
    model_text: str | None,
    reason: str,
    status: str,
    loop_cut: bool,
    *,
    claims: Sequence[str] = (),
    num_claims: int = 0,
) -> Verdict:
    """The model's text cannot stand: the quotes that answer the question on their own are the
    answer, supported or partly; else the best quote (status as given), or no answer."""
    common = {
        "model_text": model_text,
        "unsupported_claims": list(claims),
        "num_claims": num_claims,
        "loop_cut": loop_cut,
        "reason": reason,
    }
    answered = verdict_from_quotes(question, quotes, **common)
    if answered is not None:
        return answered
    if not quotes:
        return Verdict(NO_ANSWER, NO_ANSWER_TEXT, [], **common)
    best, held = _best_quote(question, quotes)
    if status == NO_ANSWER and not (_open_question(question) and held):
        return Verdict(NO_ANSWER, NOT_FOUND_TEXT, quotes, **common)
    # "Not found" only when nothing relevant was found: an open question's quote that holds
    # what it names is shown (quoted, not supported: no rule reads an open answer's role).
    status = QUOTED if status == NO_ANSWER else status
    ordered = [quotes[best]] + [quote for i, quote in enumerate(quotes) if i != best]
    return Verdict(status, quoted_answer(quotes[best]), ordered, by_quote=True, **common)


def _best_quote(question: str, quotes: Sequence[Evidence]) -> tuple[int, bool]:
    """The quote holding most of what the question names (pipelines.answer.specifics), the
    first on a tie; and whether it holds enough of it to be relevant."""
    asked = specifics(question)
    counts = [len(held_of(asked, quote.text)) for quote in quotes]
    best = max(range(len(quotes)), key=lambda i: (counts[i], -i))
    return best, len(asked) >= MIN_SPECIFICS and covers(asked, quotes[best].text)


def _open_question(question: str) -> bool:
    return all(part.kind == OPEN for part in asked_parts(question))


def verdict_from_quotes(question: str, quotes: Sequence[Evidence], **fields) -> Verdict | None:
    """The quotes that answer `question` on their own as the answer (supported when they
    settle every part it asks, else partly), labelled, first among the quotes; None when no
    quote settles any part. `fields`: the Verdict's other fields (the model's text set apart)."""
    by_quotes = answer_by_quotes(question, quotes)
    if by_quotes is None:
        return None
    chosen = [quotes[i] for i in by_quotes.quotes]
    return Verdict(
        status=by_quotes.status,
        text="\n".join(quoted_answer(quote) for quote in chosen),
        quotes=chosen + [quote for quote in quotes if quote not in chosen],
        missing=by_quotes.note,
        support_pages=tuple(dict.fromkeys(quote.page for quote in chosen)),
        by_quote=True,
        **fields,
    )


def _sentences_at(
    sentences: DocumentSentences,
    passages: Sequence[Passage],
    offsets: Sequence[int | None],
    quotes: Sequence[Evidence],
) -> list[Evidence]:
    """The document's sentences at `offsets` that are not quoted yet, at most MAX_ADDED_QUOTES."""
    taken = {quote.start_char for quote in quotes}
    added: list[Evidence] = []
    for offset in offsets:
        if offset is None or len(added) == MAX_ADDED_QUOTES:
            continue
        for start, end in sentences.overlapping(offset, offset + 1):
            if start in taken:
                continue
            taken.add(start)
            added.append(sentence_quote(sentences, passages, (start, end)))
    return added
