"""Does a quote give the answer's value the role the question asks about? One check per asked
part (pipelines.answer.asked): the answer must state a value of the part's kind, a quote must
hold that value, and the quote must say it in that role (pipelines.answer.role_words). The
value of a warning, contraindication, indication or open question is the answer's own words:
they must be in one or two quotes (pipelines.answer.entailment), in the section's words for
the first three.

A place or an outcome that a quote in the role contradicts ("Florida" against "governed by the
laws of Ohio"; "granted" against "we affirm the dismissal") is a contradiction, not a miss.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.answer import asked as k
from pipelines.answer.asked import AskedPart
from pipelines.answer.entailment import cover
from pipelines.answer.kind_values import Value, name_words, values_of
from pipelines.answer.quote_context import Quoted, in_context, shifted
from pipelines.answer.role_words import ROLE, date_asked, date_said, role_of
from pipelines.answer.specifics import covers, specifics
from pipelines.citations import remove_citations
from pipelines.retrieval.bm25 import terms
from pipelines.values.claims import normalise_word

SETTLED, UNSETTLED, ELSEWHERE, NOT_STATED, ABSENT, CONTRADICTED, INCOMPLETE = (
    "settled",  # the value is in a quote that gives it the role asked about
    "unsettled",  # in a quote, but the quote does not say it in that role
    "elsewhere",  # not in the quotes; the document holds it elsewhere
    "not_stated",  # the answer states no value of the kind asked
    "absent",  # the value is in no quote and not in the document
    "contradicted",  # a quote in the role states something else
    "incomplete",  # a dose in its role, without how often, which the quote says
)
# The share of an answer's new words that a quote must hold for it to be partly supported.
MIN_PARTIAL_COVER = 0.5
_LAW_WORDS = re.compile(r"\bgovern\w*|\blaws?\b|\bconstrued\b|\bjurisdiction", re.IGNORECASE)
# An answer this short is its value ("Ohio.", "Governing law: Ohio").
SHORT_ANSWER_WORDS = 6
_KIND_WORDS = {
    k.JURISDICTION: "the governing law",
    k.PARTY: "the parties",
    k.COURT: "the court",
    k.DATE: "the date",
    k.DOCKET: "the docket number",
    k.OUTCOME: "the outcome",
    k.DOSE: "the dose",
    k.EXPIRY: "when it ends",
    k.RENEWAL: "whether it renews",
    k.PERIOD: "the period",
    k.AMOUNT: "the amount",
    k.WARNING: "the warning",
    k.BOXED: "the boxed warning",
    k.CONTRAINDICATION: "the contraindication",
    k.INDICATION: "what it is indicated for",
    k.RELIEF: "the relief sought",
}
_POLAR = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_LEXICAL_KINDS = frozenset({k.WARNING, k.CONTRAINDICATION, k.INDICATION, k.BOXED, k.OPEN})


@dataclass(frozen=True)
class PartCheck:
    part: AskedPart
    state: str  # SETTLED, UNSETTLED, ELSEWHERE, NOT_STATED, ABSENT, CONTRADICTED, INCOMPLETE
    quotes: tuple[int, ...] = ()  # the quotes that settle it (or hold its value), by index
    value: str = ""  # the answer's value, as written

    @property
    def settled(self) -> bool:
        return self.state == SETTLED

    @property
    def note(self) -> str:
        """What is missing, as a clause a person reads."""
        what = _KIND_WORDS.get(self.part.kind) or f"“{self.part.clause}”"
        if self.state == SETTLED:
            return ""
        if self.state == NOT_STATED:
            return f"it does not say {what}"
        if self.state == UNSETTLED and self.part.kind == k.PARTY and self.value:
            return f"the quotes do not show {self.value} as a party, or name only one party"
        if self.state == UNSETTLED and self.part.kind in _LEXICAL_KINDS:
            return "only some of what it says is in the quotes"
        if self.state == UNSETTLED:
            held = f"“{self.value}”" if self.value else "its words"
            return f"the quotes hold {held} but do not say it is {what}"
        if self.state == ELSEWHERE:
            return f"{what} it gives is found elsewhere in the document, not in the quotes"
        if self.state == CONTRADICTED:
            return f"the quotes state {what} otherwise"
        if self.state == INCOMPLETE:
            return f"it gives “{self.value}” without how often, which the quotes say"
        return f"the quotes do not hold {what} it gives"


def _holds(value: Value, quote_text: str) -> list[Value]:
    """The quote's values that are the answer's `value`, where the quote has them."""
    if value.kind in (k.PARTY, k.COURT):
        words = _word_set(quote_text)
        if not all(_has_word(words, word) for word in value.key):
            return []
        span = _locate(value.text, quote_text)
        if span is None:
            return []
        return [Value(value.kind, quote_text[span[0] : span[1]], value.key, *span)]
    return [v for v in values_of(value.kind, quote_text) if value.same_as(v)]


def _locate(name: str, text: str) -> tuple[int, int] | None:
    """Where `text` writes `name`, its words in order with any spacing or punctuation between
    ("Short Term\nGovernment Fund"); else from its first word to its last."""
    words = re.findall(r"[^\W_][\w'’&-]*", name)
    if not words:
        return None
    pattern = r"\W+".join(re.escape(word) for word in words)
    found = re.search(rf"(?<!\w){pattern}(?!\w)", text, re.IGNORECASE)
    if found:
        return found.start(), found.end()
    starts = [re.search(rf"(?<!\w){re.escape(word)}", text, re.IGNORECASE) for word in words]
    hits = [match for match in starts if match]
    if not hits:
        return None
    return min(m.start() for m in hits), max(m.end() for m in hits)


def _word_set(text: str) -> set[str]:
    words = set()
    for token in re.findall(r"[\w'’.&-]+", text):
        word = normalise_word(token.strip("."))
        words.add(word)
        words.update(word.split("-"))
    return words


def _has_word(words: set[str], word: str) -> bool:
    forms = {word, f"{word}s", word.rstrip("s"), word.replace("-", "")}
    return bool(forms & words)


def check_part(
    part: AskedPart,
    answer: str,
    quotes: Sequence[Quoted],
    *,
    in_document: Callable[[str], bool] = lambda _: False,
    question: str = "",
    siblings: Sequence[AskedPart] = (),
) -> PartCheck:
    """How `answer` stands on `part` against `quotes`. `in_document(value text)`: whether the
    document holds a value that no quote does. `siblings`: the question's other parts of the
    same kind ("when was it argued" beside "when was it decided"): a value that a quote gives
    in a sibling's role is that part's answer, not a wrong one of this part."""
    text = remove_citations(answer)
    if part.kind in _LEXICAL_KINDS:
        return _lexical(part, text, quotes, question or part.clause)
    values = _answer_values(part, text)
    if not values or not _states_role(part.kind, text):
        return PartCheck(part, NOT_STATED)
    settling: list[int] = []
    unsettled: tuple[int, str] | None = None
    for value in values:
        in_role, holding = _quotes_for(part, value, quotes)
        if _contradicted(part, value, quotes):
            return PartCheck(part, CONTRADICTED, value=value.text)
        if in_role:
            if _how_often_left_out(part, value, quotes, in_role):
                return PartCheck(part, INCOMPLETE, (in_role[0],), value.text)
            settling.append(in_role[0])
            continue
        if _answers_a_sibling(part, value, text, siblings, quotes):
            continue
        if holding:
            unsettled = unsettled or (holding[0], value.text)
            continue
        state = ELSEWHERE if in_document(value.text) else ABSENT
        return PartCheck(part, state, value=value.text)
    if unsettled is not None:
        return PartCheck(part, UNSETTLED, (unsettled[0],), unsettled[1])
    if not settling:  # every value it gives answers another part
        return PartCheck(part, NOT_STATED)
    indices = tuple(dict.fromkeys(settling))
    if part.kind == k.PARTY and _asks_plural(part.clause) and len(values) < 2:
        return PartCheck(part, UNSETTLED, indices, values[0].text)
    return PartCheck(part, SETTLED, indices, values[0].text)


def _how_often_left_out(
    part: AskedPart, value: Value, quotes: Sequence[Quoted], in_role: Sequence[int]
) -> bool:
    """Whether a dose is given without how often ("500 mg") where every quote that gives it in
    its role says how often ("500 mg every 12 hours"): half a dose, as a pharmacist reads it."""
    if part.kind != k.DOSE or any(hours is not None for *_, hours in value.key):
        return False
    held = [v for i in in_role for v in _holds(value, quotes[i].text)]
    return bool(held) and all(hours is not None for v in held for *_, hours in v.key)


def _answers_a_sibling(
    part: AskedPart,
    value: Value,
    answer: str,
    siblings: Sequence[AskedPart],
    quotes: Sequence[Quoted],
) -> bool:
    """Whether `value`, not in `part`'s role, is a sibling part's answer: a quote gives it in the
    sibling's role, and the answer does not give it as this part's ("argued on June 13" is
    the answer's word for the argument date, however the quotes read June 13)."""
    if part.kind == k.DATE and date_said(answer, value) == date_asked(part.clause) is not None:
        return False
    return any(_quotes_for(sibling, value, quotes)[0] for sibling in siblings)


def _states_role(kind: str, answer: str) -> bool:
    """Whether the answer says its value is what was asked: a place named in an answer that
    speaks of no law ("a copy of a New York bank's rules") is not a governing law. A short
    answer ("Ohio.") is its value."""
    if kind != k.JURISDICTION or len(answer.split()) <= SHORT_ANSWER_WORDS:
        return True
    return _LAW_WORDS.search(answer) is not None


def _answer_values(part: AskedPart, text: str) -> list[Value]:
    values = values_of(part.kind, text)
    if part.kind == k.EXPIRY and any(value.kind == k.DATE for value in values):
        # An end date is the expiry; a period beside it is a renewal term or a notice period.
        values = [value for value in values if value.kind == k.DATE]
    if part.kind == k.PARTY:
        values = _distinct_names(values)
    if not values and part.kind == k.RENEWAL:
        polar = _POLAR.match(text)
        if polar:  # "Yes." to "Does it renew automatically?"
            automatic = "automatic" in part.clause.lower()
            key = frozenset({"automatic" if automatic else "renewal"})
            negated = polar.group(1).lower() == "no"
            values = [Value(k.RENEWAL, polar.group(1), key, polar.start(1), polar.end(1), negated)]
    return values


def _distinct_names(values: list[Value]) -> list[Value]:
    """Names of parties, one each: "Acme" is not a second party beside "Acme Corp."."""
    kept: list[Value] = []
    for value in values:
        words = name_words(value.text)
        if any(
            words <= name_words(other.text) or name_words(other.text) <= words for other in kept
        ):
            continue
        kept.append(value)
    return kept


def _asks_plural(clause: str) -> bool:
    return re.search(r"\bparties\b|\bwho\s+are\b", clause, re.IGNORECASE) is not None


def _quotes_for(
    part: AskedPart, value: Value, quotes: Sequence[Quoted]
) -> tuple[list[int], list[int]]:
    """(quotes that hold `value` in its role, quotes that hold it at all), by index. The role
    is read in the quote's context (in_context)."""
    in_role, holding = [], []
    for index, quote in enumerate(quotes):
        held = _holds(value, quote.text)
        if part.kind in (k.OUTCOME, k.RENEWAL):
            held = [v for v in held if v.negated == value.negated]
        if not held:
            continue
        holding.append(index)
        context = in_context(quotes, index)
        if any(role_of(part.kind, part.clause, context, shifted(v, context.offset)) for v in held):
            in_role.append(index)
    return in_role, holding


def _contradicted(part: AskedPart, value: Value, quotes: Sequence[Quoted]) -> bool:
    """Whether a quote in the role states a place, outcome or renewal other than `value`."""
    if part.kind not in (k.JURISDICTION, k.OUTCOME, k.RENEWAL):
        return False
    agreeing = contrary = False
    for index, quote in enumerate(quotes):
        context = in_context(quotes, index)
        said = [
            v
            for v in values_of(part.kind, quote.text)
            if role_of(part.kind, part.clause, context, shifted(v, context.offset))
        ]
        if not said:
            continue
        if part.kind == k.JURISDICTION:
            same = any(value.same_as(v) for v in said)
        else:  # the same outcome, negated or not as the answer has it
            same = any(value.same_as(v) and v.negated == value.negated for v in said)
        agreeing = agreeing or same
        contrary = contrary or not same
    return contrary and not agreeing


def _lexical(part: AskedPart, text: str, quotes: Sequence[Quoted], question: str) -> PartCheck:
    texts = [quote.text for quote in quotes]
    if part.kind != k.OPEN:
        # The section's own words first: a warning rests on a quote that warns.
        in_role = [i for i, quote in enumerate(quotes) if ROLE[part.kind].search(quote.text)]
        texts = [texts[i] for i in in_role]
    else:
        in_role = list(range(len(quotes)))
    found = cover(text, question, texts)
    if found is None:
        return PartCheck(part, NOT_STATED)
    indices = tuple(in_role[i] for i in found.sharing)
    if found.flipped and found.share >= MIN_PARTIAL_COVER:
        return PartCheck(part, CONTRADICTED, indices)
    if (
        found.share == 1.0
        and part.kind == k.OPEN
        and not _on_the_question(question, text, quotes, indices)
    ):
        # Every word of it is quoted, but neither it nor its quotes speak of what was asked:
        # "Court: ... Court of Appeals" for "Which district judge ruled below?".
        return PartCheck(part, UNSETTLED, indices)
    if found.share == 1.0:
        return PartCheck(part, SETTLED, indices)
    if found.share >= MIN_PARTIAL_COVER:
        return PartCheck(part, UNSETTLED, indices)
    return PartCheck(part, ABSENT)


def _on_the_question(
    question: str, answer: str, quotes: Sequence[Quoted], indices: Sequence[int]
) -> bool:
    """Whether the answer with the quote it rests on most (the one holding most of its words)
    holds most of what the question names (pipelines.answer.specifics)."""
    if not indices:
        return False
    words = set(terms(answer))
    source = max(indices, key=lambda i: len(words & set(terms(quotes[i].text))))
    return covers(specifics(question), f"{answer} {quotes[source].text}")
