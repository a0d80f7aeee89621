"""Judging one answer (or one key fact) against a labelled expectation: right, partial, wrong,
missed or abstained. Plain functions of text, no model, no database.

What is judged is the text a person reads: the answer as shown. A quoted fallback ('"..."
(quoted from p. 4)', shown when the model's answer was replaced by the best quote) is judged by
its quote, since that is what the reader takes as the answer; it never counts as abstaining.

- right: the text states an accepted form of `need` of the expected parts;
- partial: it states some parts, fewer than `need`;
- abstained: it states none and says the document does not say (or the status is no_answer);
- wrong: it states another value of the asked kind (another date for a date question, another
  jurisdiction, another disposition word...), or, for kinds whose values cannot be told apart
  from other text (names, indications, holdings), it says anything else without abstaining;
- missed: a kind with a value detector, and the text states no value of that kind at all.

For an "absent" label (the document does not state it) right is abstaining or stating one of
the forms given (what the document says instead, "no renewal clause"); wrong is stating a value
of the kind (any text, for kinds without a detector).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.values.dates import find_dates
from pipelines.values.durations import find_durations
from pipelines.values.jurisdictions import find_jurisdictions

RIGHT, PARTIAL, WRONG, MISSED, ABSTAINED = "right", "partial", "wrong", "missed", "abstained"
OUTCOMES = (RIGHT, PARTIAL, WRONG, MISSED, ABSTAINED)
NO_ANSWER_STATUS = "no_answer"

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_PERIOD = re.compile(r"^P\d+[DWMY]$")
_QUOTED = re.compile(r'^\s*"(?P<quote>.*)"\s*\(quoted from pp?\. [\d, –-]+\)\s*$', re.DOTALL)
# A form that ends in a letter also matches its plain inflections ("dismiss": "dismissed").
_SUFFIXES = r"(?:s|es|ed|d|ing|al)?"
_ABSTAINING = re.compile(
    r"\b(?:does|do|did)(?: not|n't) (?:seem to )?(?:say|state|specify|mention|provide|indicate|"
    r"contain|include|list|give|identify|address|disclose|answer)\b"
    r"|\bnot (?:stated|specified|mentioned|found|provided|given|listed|included|disclosed)\b"
    r"|\bno (?:information|mention|answer)\b|\bno [\w\s-]{0,40}\bfound\b"
    r"|\b(?:unable|not able) to (?:find|determine|answer)\b|\bcannot (?:find|determine|answer)\b"
    r"|\bnot (?:clear|possible to tell)\b",
    re.IGNORECASE,
)
_COURT = re.compile(r"\b(?:court|circuit|tribunal)\b", re.IGNORECASE)
# Any number answers "what is the case number?" (a year given as the docket is a wrong one).
_DOCKET = re.compile(r"\d")
_DISPOSITION = re.compile(
    r"\b(?:affirm|revers|vacat|remand|dismiss|den(?:y|ied|ies)|grant|modif|overrul|uph[eo]ld|"
    r"set aside|quash)\w*",
    re.IGNORECASE,
)
_DOSE = re.compile(
    r"\b\d+(?:[.,]\d+)?\s*(?:mg|g|gram|grams|mcg|ml|units?|tablets?|capsules?)\b|mg/kg"
    r"|\b(?:once|twice|three times|every \d+ hours?)\b",
    re.IGNORECASE,
)
_TERM_WORDS = re.compile(r"\b(?:perpetu\w*|indefinite\w*|until|expire\w*)\b", re.IGNORECASE)
_RENEW_WORDS = re.compile(r"\b(?:renew\w*|automatic\w*|extend\w*|extension)\b", re.IGNORECASE)
_IMMEDIATE = re.compile(r"\bimmediate(?:ly)?\b", re.IGNORECASE)


@dataclass(frozen=True)
class Expectation:
    """What a right answer states: `parts`, each a tuple of accepted forms, `need` of them;
    `absent`: the document does not state it (the parts then are ways of saying so)."""

    parts: tuple[tuple[str, ...], ...]
    need: int
    absent: bool = False

    @classmethod
    def of(cls, parts: Sequence[Sequence[str]], need: int | None = None, absent: bool = False):
        frozen = tuple(tuple(part) for part in parts)
        return cls(frozen, len(frozen) if need is None else need, absent)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # one of OUTCOMES
    why: str  # a few words: which rule decided
    parts_stated: int
    is_quote: bool  # judged by a quoted fallback's quote


def normalize(text: str) -> str:
    """Lowercase letters and digits, one space between words; "2,000" reads as "2000"."""
    text = unicodedata.normalize("NFKC", text).lower().replace("β", "beta ")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def shown_text(answer: str) -> tuple[str, bool]:
    """The text judged, and whether it is a quoted fallback's quote."""
    match = _QUOTED.match(answer)
    return (match.group("quote"), True) if match else (answer, False)


def is_special_form(form: str) -> bool:
    """An ISO date, an ISO period or an anchored form: matched otherwise than as words."""
    return bool(_ISO_DATE.match(form) or _ISO_PERIOD.match(form) or form.startswith("^"))


def form_matches(form: str, text: str) -> bool:
    """Whether `text` states `form` (bench/quality_questions.json's "about" says how)."""
    if _ISO_DATE.match(form):
        return form in {mention.iso for mention in find_dates(text)}
    if _ISO_PERIOD.match(form):
        return form in {mention.iso for mention in find_durations(text)}
    anchored = form.startswith("^")
    key = normalize(form[1:] if anchored else form)
    if not key:
        return False
    end = _SUFFIXES if key[-1].isalpha() else ""
    start = "^" if anchored else r"(?<![a-z0-9])"
    return re.search(rf"{start}{re.escape(key)}{end}(?![a-z0-9])", normalize(text)) is not None


def parts_stated(expectation: Expectation, text: str) -> int:
    return sum(any(form_matches(form, text) for form in part) for part in expectation.parts)


def abstains(text: str) -> bool:
    return _ABSTAINING.search(text) is not None


def _dates(text: str) -> bool:
    return bool(find_dates(text))


def _periods(text: str) -> bool:
    return bool(find_durations(text))


def _matches(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda text: pattern.search(text) is not None


def _any(*tests: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda text: any(test(text) for test in tests)


# Kinds whose values can be recognised in any text; the other kinds (names, indications,
# holdings...) have none, so an answer of theirs that is not right and does not abstain is wrong.
VALUE_DETECTORS: dict[str, Callable[[str], bool]] = {
    "date": _dates,
    "decision_date": _dates,
    "expiration": _any(_dates, _periods, _matches(_TERM_WORDS)),
    "renewal": _any(_periods, _matches(_RENEW_WORDS)),
    "notice": _any(_periods, _dates, _matches(_IMMEDIATE)),
    "governing_law": lambda text: bool(find_jurisdictions(text, proper_nouns_only=True)),
    "court": _matches(_COURT),
    "docket": _matches(_DOCKET),
    "docket_number": _matches(_DOCKET),
    "lower_docket_number": _matches(_DOCKET),
    "disposition": _matches(_DISPOSITION),
    "dosage": _any(_matches(_DOSE), _periods),
}


def states_value(kind: str, text: str) -> bool | None:
    """Whether `text` states some value of `kind`; None for kinds without a detector."""
    detector = VALUE_DETECTORS.get(kind)
    return None if detector is None else detector(text)


def _hard_value(text: str) -> bool:
    """A date, a period or a jurisdiction: a value however the sentence around it reads
    ("It does not say; it expires on 1 May 2030" states a date)."""
    return _dates(text) or _periods(text) or bool(find_jurisdictions(text, proper_nouns_only=True))


def judge(kind: str, expectation: Expectation, answer: str, status: str | None) -> Verdict:
    """The verdict on `answer` (as shown, with its support status) for a question of `kind`."""
    text, is_quote = shown_text(answer)
    stated = parts_stated(expectation, text)
    said_none = status == NO_ANSWER_STATUS or (not is_quote and abstains(text))
    value = states_value(kind, text) if text.strip() else False
    # An abstaining sentence may name the kind ("does not say when it expires"): only a hard
    # value outweighs it.
    abstained = said_none and not (value and _hard_value(text))
    if expectation.absent:
        if stated:
            return Verdict(RIGHT, "says what the document says instead", stated, is_quote)
        if abstained:
            return Verdict(RIGHT, "abstains", stated, is_quote)
        if value or (value is None and text.strip()):
            return Verdict(WRONG, "states a value the document lacks", stated, is_quote)
        return Verdict(MISSED, "states no value of the kind", stated, is_quote)
    if stated >= expectation.need:
        return Verdict(RIGHT, "states an accepted form", stated, is_quote)
    if stated:
        return Verdict(PARTIAL, f"states {stated} of {expectation.need} parts", stated, is_quote)
    if abstained:
        return Verdict(ABSTAINED, "abstains", stated, is_quote)
    if value or (value is None and text.strip()):
        return Verdict(WRONG, "states another value", stated, is_quote)
    return Verdict(MISSED, "states no value of the kind", stated, is_quote)
