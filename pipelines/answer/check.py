"""The verdict on a model's answer: keep it (supported, or nothing in it to check), or show the
best quote instead (the answer states something the document does not, or the model gave
nothing usable: empty, or a loop from its first sentence on).

Support statuses, stored with the answer:

- "supported": every date, number, amount, place and name the answer states is in the quotes
  or the document; a sentence of the document holding one the quotes lack is added to them.
- "unchecked": the answer states none of those, so there was nothing to check it against.
- "unsupported": the answer states something found neither in the quotes nor in the document;
  the answer shown is the best quote, the model's text is kept beside it.
- "quoted": the model gave nothing usable (empty, a loop from its first sentence, only the
  words of its instructions and the question, or none of what the question asks for while a
  quote states it: no place for "which state's law governs"); the answer shown is the best
  quote.
- "no_answer": nothing usable and no quote to fall back on; or the question asks for a key
  fact that the facts job searched for and found none of (pipelines.answer.from_facts), the closest
  sentences quoted beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelines.answer.asked import holds
from pipelines.answer.support import IN_DOCUMENT, FactIndex, check_support
from pipelines.citations import remove_citations
from pipelines.documents import Passage
from pipelines.repetition import before_loop
from pipelines.retrieval.bm25 import terms
from pipelines.retrieval.evidence import DocumentSentences, Evidence
from pipelines.retrieval.quotes import sentence_quote

SUPPORTED, UNCHECKED, UNSUPPORTED, QUOTED, NO_ANSWER = (
    "supported",
    "unchecked",
    "unsupported",
    "quoted",
    "no_answer",
)
FALLBACK_STATUSES = frozenset({UNSUPPORTED, QUOTED, NO_ANSWER})
# At most this many sentences are added to the quotes for claims only the document holds.
MAX_ADDED_QUOTES = 2
NO_ANSWER_TEXT = (
    "The document does not seem to answer this: no sentence of it matches the question, and "
    "the model gave no answer that could be checked."
)


@dataclass(frozen=True)
class Verdict:
    status: str
    text: str  # the answer to show: the model's (loop cut off) or the best quote, labelled
    quotes: list[Evidence]
    model_text: str | None = None  # the model's own answer, when the best quote replaced it
    unsupported_claims: list[str] = field(default_factory=list)
    num_claims: int = 0
    loop_cut: bool = False


def quoted_answer(quote: Evidence) -> str:
    """The best quote as the answer, labelled: "..." (quoted from p. 4)."""
    return f'"{" ".join(quote.text.split())}" (quoted from p. {quote.page})'


def judge_answer(
    model_text: str,
    quotes: Sequence[Evidence],
    sentences: DocumentSentences,
    passages: Sequence[Passage],
    *,
    echo_of: str | None = None,
    facts: FactIndex | None = None,
    asked: str | None = None,
) -> Verdict:
    """Check `model_text` against `quotes` and the document; see the module docstring.

    `echo_of`: the prompt's own words (task and question); an answer made only of them (a
    small model repeating its instructions: "The document's own words are used to answer the
    question.") is no answer. `facts` is the document's FactIndex, for callers that check many
    answers of one document. `asked`: the kind of thing the question asks for
    (pipelines.answer.asked); the quotes are expected in the order answer_types.holding_first
    gives, so the first quote is the one to fall back on.
    """
    quotes = list(quotes)
    raw = model_text.strip()
    usable = before_loop(raw).strip()
    loop_cut = usable != raw
    if usable and echo_of is not None and _only_words_of(usable, echo_of):
        usable = ""
    if not usable:
        status = QUOTED if quotes else NO_ANSWER
        return _fallback(status, quotes, raw or None, [], 0, loop_cut)
    check = check_support(usable, [q.text for q in quotes], facts or sentences.text)
    if not check.is_supported:
        missing = [claim.text for claim in check.missing]
        return _fallback(UNSUPPORTED, quotes, raw, missing, check.num_claims, loop_cut)
    if not holds(usable, asked) and any(holds(quote.text, asked) for quote in quotes):
        return _fallback(QUOTED, quotes, raw, [], check.num_claims, loop_cut)
    offsets = [c.document_offset for c in check.checks if c.found_in == IN_DOCUMENT]
    added = _sentences_at(sentences, passages, offsets, quotes)
    return Verdict(
        status=SUPPORTED if check.num_claims else UNCHECKED,
        text=usable,
        quotes=quotes + added,
        num_claims=check.num_claims,
        loop_cut=loop_cut,
    )


def _only_words_of(answer: str, prompt: str) -> bool:
    """Whether every content word of `answer` (by BM25 stem, citations aside) is in `prompt`."""
    words = set(terms(remove_citations(answer)))
    return words <= set(terms(prompt))


def _fallback(
    status: str,
    quotes: list[Evidence],
    model_text: str | None,
    missing: list[str],
    num_claims: int,
    loop_cut: bool,
) -> Verdict:
    text = quoted_answer(quotes[0]) if quotes else NO_ANSWER_TEXT
    return Verdict(status, text, quotes, model_text, missing, num_claims, loop_cut)


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
