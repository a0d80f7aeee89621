"""How an answer stands against its quotes, by meaning: a pure function of (question, answer,
quotes, document text), no model inside.

1. Rejected before any check (pipelines.answer.rejections): a placeholder, an echo of the
   question or the prompt, a tautology ("no usable answer"); a self-contradiction or a quote
   the document does not hold ("not supported").
2. Every date, number, place and name the answer states must be in the quotes or the document
   (pipelines.answer.support); one found nowhere makes it not supported.
3. Each part the question asks (pipelines.answer.asked) is checked against the quotes
   (pipelines.answer.roles): every part settled (its value in a quote that says it in that
   role) is supported; a contradiction, or a value in no quote nor the document, is not
   supported; no part answered is no answer; anything between is partly supported, with a
   sentence saying what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelines.answer import asked as k
from pipelines.answer.asked import AskedPart, asked_parts
from pipelines.answer.kind_values import Value, values_of
from pipelines.answer.quote_context import Context, Quoted, in_context
from pipelines.answer.rejections import (
    CONTRADICTION,
    FABRICATED_QUOTE,
    Rejection,
    rejection,
    says_not_stated,
)
from pipelines.answer.role_words import role_of
from pipelines.answer.roles import (
    ABSENT,
    CONTRADICTED,
    NOT_STATED,
    SETTLED,
    PartCheck,
    check_part,
)
from pipelines.answer.specifics import held_of, specifics
from pipelines.answer.support import FactIndex, SupportCheck, check_support
from pipelines.answer.verbatim import VerbatimIndex

SUPPORTED, PARTLY_SUPPORTED, UNSUPPORTED, QUOTED = (
    "supported",
    "partly_supported",
    "unsupported",
    "quoted",
)
# Rejections that mean the model said something false, not merely nothing.
FALSE_STATEMENTS = frozenset({CONTRADICTION, FABRICATED_QUOTE})
# Kinds a quote can settle on its own, as the answer: their value and role are in its words.
QUOTABLE_KINDS = frozenset(
    {
        k.JURISDICTION, k.PARTY, k.COURT, k.DATE, k.DOCKET, k.OUTCOME, k.DOSE, k.EXPIRY,
        k.RENEWAL, k.PERIOD, k.AMOUNT, k.WARNING, k.CONTRAINDICATION, k.INDICATION, k.BOXED,
        k.RELIEF,
    }
)  # fmt: skip
# Parties need two named in the role to settle "who are the parties".
MIN_PARTIES = 2


@dataclass(frozen=True)
class Assessment:
    status: str  # SUPPORTED, PARTLY_SUPPORTED, UNSUPPORTED or QUOTED (no usable answer)
    parts: tuple[PartCheck, ...] = ()
    note: str = ""  # what is missing (partly supported) or why not supported, a sentence
    unsupported_claims: list[str] = field(default_factory=list)
    rejection: Rejection | None = None
    not_stated: bool = False  # the answer says the document does not say
    claims: SupportCheck | None = None

    @property
    def evidence_quotes(self) -> tuple[int, ...]:
        """The quotes (by index) that settle a part, then those that only hold a part's value,
        in order, without repeats: where the answer's support is."""
        settled = [i for part in self.parts if part.settled for i in part.quotes]
        held = [i for part in self.parts if not part.settled for i in part.quotes]
        return tuple(dict.fromkeys(settled + held))


def assess(
    question: str,
    answer: str,
    quotes: Sequence[Quoted],
    *,
    document: FactIndex | str,
    verbatim: VerbatimIndex | str | None = None,
    prompt: str | None = None,
    claims: SupportCheck | None = None,
) -> Assessment:
    """How `answer` stands against `quotes` (see the module docstring). `document`: the
    document's text or FactIndex; `verbatim`: its VerbatimIndex, for callers that assess many
    answers; `prompt`: the words of the task and the question; `claims`: the answer's claims
    already looked up (check_support), if the caller has them."""
    text_index = verbatim if verbatim is not None else _text_of(document)
    rejected = rejection(answer, prompt=prompt, document=text_index)
    if rejected is not None:
        status = UNSUPPORTED if rejected.reason in FALSE_STATEMENTS else QUOTED
        return Assessment(
            status, note=rejected.sentence, unsupported_claims=rejected.claims, rejection=rejected
        )
    if says_not_stated(answer):
        return Assessment(
            UNSUPPORTED, note="The model's answer says the document does not say.", not_stated=True
        )
    claims = claims or check_support(answer, [q.text for q in quotes], document)
    if not claims.is_supported:
        missing = [claim.text for claim in claims.missing]
        named = ", ".join(f"“{claim}”" for claim in missing)
        note = f"The model's answer states {named}, which the document does not contain."
        return Assessment(UNSUPPORTED, note=note, unsupported_claims=missing, claims=claims)
    index = document if isinstance(document, FactIndex) else None

    def in_document(value: str) -> bool:
        nonlocal index
        index = index or FactIndex(str(document))
        found = check_support(value, [], index)
        return found.num_claims > 0 and found.is_supported

    asked = asked_parts(question)
    parts = tuple(
        check_part(
            part,
            answer,
            quotes,
            in_document=in_document,
            question=question,
            siblings=[other for other in asked if other.kind == part.kind and other != part],
        )
        for part in asked
    )
    status, note = _combined(parts)
    return Assessment(status, parts, note, claims=claims)


def _text_of(document: FactIndex | str) -> str:
    return document.text if isinstance(document, FactIndex) else document


def _combined(parts: tuple[PartCheck, ...]) -> tuple[str, str]:
    states = {part.state for part in parts}
    notes = "; ".join(part.note for part in parts if part.note)
    if CONTRADICTED in states:
        return UNSUPPORTED, f"Not supported: {notes}."
    if ABSENT in states:
        return UNSUPPORTED, f"Not supported: {notes}."
    if states == {NOT_STATED}:
        return QUOTED, f"The model's answer does not answer the question: {notes}."
    if states == {SETTLED}:
        return SUPPORTED, ""
    return PARTLY_SUPPORTED, f"Partly supported: {notes}."


# ---- a quote as the answer -----------------------------------------------------------------


def quote_settles(
    part: AskedPart, quotes: Sequence[Quoted], index: int, *, joined: bool = True
) -> tuple[int, ...]:
    """The quotes that, read as the answer, state what `part` asks in its role: quote `index`
    alone, or (`joined`) with those of the quotes that continue it (quote_context.in_context)
    that hold the values; () when they do not. A value of the kind the quote gives that role
    settles it ("between Acme Corp. and Beta LLC"; two such names for "who are the parties");
    an open part is never settled by a quote."""
    if part.kind not in QUOTABLE_KINDS:
        return ()
    quote = quotes[index]
    contexts = [Context(quote.text, quote.page, 0, (index,))]
    if joined:
        contexts.append(in_context(quotes, index))
    for context in contexts:
        span = _settles(part, context)
        if span is not None:
            return _members_over(quotes, context, span)
    return ()


def first_settling(part: AskedPart, quotes: Sequence[Quoted]) -> tuple[int, ...]:
    """The quotes of the first quote that settles `part` alone, else of the first that does
    joined with the quotes that continue it (a caption in pieces); () when none does. "First":
    of those holding most of what the part's clause names (pipelines.answer.specifics: the
    sentence on a GFR "less than 10" before the one on "10 to 30"), then in their order."""
    asked = specifics(part.clause)
    order = sorted(range(len(quotes)), key=lambda i: -len(held_of(asked, quotes[i].text)))
    for joined in (False, True):
        for index in order:
            members = quote_settles(part, quotes, index, joined=joined)
            if members:
                return members
    return ()


def _members_over(
    quotes: Sequence[Quoted], context: Context, span: tuple[int, int]
) -> tuple[int, ...]:
    """The members of `context` whose text overlaps [start, end) of it."""
    kept, at = [], 0
    for member in context.members:
        end = at + len(quotes[member].text)
        if at < span[1] and span[0] < end:
            kept.append(member)
        at = end + 1
    return tuple(kept) or context.members


def _settles(part: AskedPart, context: Context) -> tuple[int, int] | None:
    """Where in the context the values that settle `part` are, or None."""
    if part.kind in (k.WARNING, k.CONTRAINDICATION, k.INDICATION, k.BOXED):
        found = role_of(part.kind, part.clause, context, _no_value(part.kind))
        return (0, len(context.text)) if found else None
    in_role = [
        value
        for value in values_of(part.kind, context.text)  # an expiry: a date, a period, no end
        if not value.negated and role_of(part.kind, part.clause, context, value)
    ]
    if not in_role:
        return None
    if part.kind == k.PARTY and len({value.key for value in in_role}) < MIN_PARTIES:
        return None
    if part.kind == k.PARTY:
        in_role = in_role[:MIN_PARTIES]
    return min(v.start for v in in_role), max(v.end for v in in_role)


def _no_value(kind: str) -> Value:
    return Value(kind, "", frozenset(), 0, 0)


@dataclass(frozen=True)
class QuoteAnswer:
    """The quotes that answer the question in place of the model, and how far."""

    quotes: tuple[int, ...]  # by index, one per settled part, in the question's order
    status: str  # SUPPORTED (every part settled) or PARTLY_SUPPORTED
    note: str


def answer_by_quotes(question: str, quotes: Sequence[Quoted]) -> QuoteAnswer | None:
    """The quotes that settle the question's parts on their own (each with the quotes that
    continue it); None when none settles a part."""
    chosen: list[int] = []
    unsettled: list[AskedPart] = []
    for part in asked_parts(question):
        members = first_settling(part, quotes)
        if not members:
            unsettled.append(part)
            continue
        chosen += [i for i in members if i not in chosen]
    if not chosen:
        return None
    if not unsettled:
        return QuoteAnswer(tuple(chosen), SUPPORTED, "")
    missing = "; ".join(_quote_note(part) for part in unsettled)
    note = f"Partly supported: the quotes answer only part of the question: {missing}."
    return QuoteAnswer(tuple(chosen), PARTLY_SUPPORTED, note)


def _quote_note(part: AskedPart) -> str:
    return PartCheck(part, NOT_STATED).note.replace("it does not", "they do not", 1)


def settling_first(quotes: Sequence[Quoted], question: str) -> list[int]:
    """Indices of `quotes`, those that settle a part of the question on their own first (the
    first such for each part, in the question's order), then the others in their order."""
    first: list[int] = []
    for part in asked_parts(question):
        first += [i for i in first_settling(part, quotes) if i not in first]
    return first + [i for i in range(len(quotes)) if i not in first]
