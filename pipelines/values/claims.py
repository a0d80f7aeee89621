"""What an answer states that can be checked against a text: dates, numbers and amounts, places,
and names. Every finder returns spans of the text it read, with values normalised so that the
same fact written two ways compares equal: "19th day of December, 2018" and "2018-12-19" are
both (2018, 12, 19); "thirty (30) days", "30 days" and "thirty days" all hold 30; "$5 million"
and "5,000,000" are both 5000000; "L.L.C." and "LLC" are the word "llc".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from pipelines.retrieval.bm25s_lib import STOPWORDS_EN

DateValue = tuple[int | None, int, int | None]  # (year or None, month, day or None)


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    values: frozenset  # DateValue, Decimal, or normalised words, by finder


_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_UNITS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
]  # fmt: skip
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_ORDINAL_UNITS = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
    "seventeenth", "eighteenth", "nineteenth",
]  # fmt: skip
_NUMBER_WORD_VALUES = {word: i for i, word in enumerate(_UNITS)} | {
    word: 20 + 10 * i for i, word in enumerate(_TENS)
}


def _ordinal_days() -> dict[str, int]:
    days = {word: i for i, word in enumerate(_ORDINAL_UNITS, start=1)}
    days |= {"twentieth": 20, "thirtieth": 30}
    for tens, base in (("twenty", 20), ("thirty", 30)):
        for word, unit in list(days.items())[:9]:
            if base + unit <= 31:
                days[f"{tens}-{word}"] = base + unit
                days[f"{tens} {word}"] = base + unit
    return days


_DAY_WORDS = _ordinal_days()
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY_WORD_RE = "|".join(sorted((re.escape(w) for w in _DAY_WORDS), key=len, reverse=True))
_DAY = rf"(?P<day>\d{{1,2}}|{_DAY_WORD_RE})(?:\s*(?:st|nd|rd|th))?"
_YEAR = r"(?P<year>(?:1[89]|20)\d\d)"
_MONTH = rf"(?P<month>{_MONTH_RE})\.?"
_DATE_PATTERNS = (
    # "December 19, 2018", "Dec. 19th 2018"
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    # "19 December 2018", "19th day of December, 2018", "the first day of May 2024"
    re.compile(rf"\b{_DAY}(?:\s+day)?(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    # "2018-12-19"
    re.compile(r"\b(?P<year>(?:1[89]|20)\d\d)-(?P<month>\d{1,2})-(?P<day>\d{1,2})\b"),
    # "December 2018", "Dec. 2018"
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    # "December 19" with no year: a capitalised month only ("may 5" is a verb and a number).
    re.compile(
        rf"\b(?P<month>(?:[A-Z][a-z]+|[A-Z]+))\.?\s+{_DAY}\b(?!\s*(?:,\s*)?\d)",
    ),
)
# "12/19/2018", "19.12.18": which is the day depends on the country, so both readings count.
_NUMERIC_DATE = re.compile(
    r"(?<![\d/-])(?<!\d\.)(?P<a>\d{1,2})(?P<sep>[/.-])(?P<b>\d{1,2})(?P=sep)(?P<year>\d{4}|\d\d)"
    r"(?![\d/-]|\.\d)"
)

_CURRENCY = r"(?:US\$|U\.S\.\s?\$|\$|€|£|¥|(?:USD|EUR|GBP|CAD|AUD|CHF|JPY)\s?)"
_SCALE = r"(?:\s*(?P<scale>million|billion|thousand)\b)?"
_NUMBER = re.compile(
    rf"(?P<currency>{_CURRENCY})?(?<![\w.,])(?P<digits>\d{{1,3}}(?:,\d{{3}})+|\d+)"
    rf"(?P<fraction>\.\d+)?(?:st|nd|rd|th)?(?!\w){_SCALE}(?P<percent>\s?%)?",
    re.IGNORECASE,
)
_SCALE_VALUES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORD = "|".join(sorted([*_NUMBER_WORD_VALUES, *_SCALES], key=len, reverse=True))
_NUMBER_WORDS = re.compile(
    rf"\b(?:{_NUMBER_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{_NUMBER_WORD}))*\b", re.IGNORECASE
)

# A word of a name: letters and digits, with inner dots, apostrophes, hyphens and ampersands.
_TOKEN = re.compile(r"[^\W_](?:[\w'’.&-]*[^\W_])?")
# "and" is not one: "Acme and Beta" are two names, each checked on its own.
_CONNECTORS = frozenset({"of", "&", "de", "du", "da", "van", "von", "der", "la", "le"})
# Words of a name that answers write differently from documents, or that every text has.
_UNCHECKED_WORDS = frozenset(STOPWORDS_EN) | {
    "inc", "incorporated", "corp", "corporation", "co", "company", "ltd", "limited", "llc",
    "llp", "lp", "plc", "gmbh", "ag", "sa", "bv", "nv", "pty", "mr", "mrs", "ms", "dr",
}  # fmt: skip


def find_dates(text: str) -> list[Span]:
    """Dates in `text`, as sets of (year, month, day) readings; overlapping matches resolved to
    the one that starts first, then the longest."""
    found: list[Span] = []
    for pattern in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            value = _date_value(match.groupdict())
            if value is not None:
                found.append(Span(match.start(), match.end(), frozenset({value})))
    for match in _NUMERIC_DATE.finditer(text):
        year = _full_year(match.group("year"))
        a, b = int(match.group("a")), int(match.group("b"))
        readings = {
            (year, month, day)
            for month, day in ((a, b), (b, a))
            if 1 <= month <= 12 and 1 <= day <= 31
        }
        if readings:
            found.append(Span(match.start(), match.end(), frozenset(readings)))
    return _without_overlaps(found)


def find_numbers(text: str, *, skip: Sequence[Span] = ()) -> list[Span]:
    """Numbers, amounts and percentages, in digits or words, outside the `skip` spans; a scaled
    amount holds its scaled value ("$5 million" -> 5000000)."""
    found = []
    for match in _NUMBER.finditer(text):
        value = _decimal(match.group("digits") + (match.group("fraction") or ""))
        if value is None:
            continue
        scale = (match.group("scale") or "").lower()
        values = {value * _SCALE_VALUES[scale]} if scale else {value}
        start = match.start("currency") if match.group("currency") else match.start("digits")
        found.append(Span(start, match.end(), frozenset(values)))
    for match in _NUMBER_WORDS.finditer(text):
        value = _words_value(match.group(0))
        if value is not None:
            found.append(Span(match.start(), match.end(), frozenset({Decimal(value)})))
    return [span for span in _without_overlaps(found) if not _inside(span, skip)]


def find_names(text: str, *, skip: Sequence[Span] = ()) -> list[Span]:
    """Names as an answer writes them: runs of capitalised words ("Beta Capital LLC", "Bank of
    Ohio"), as sets of the normalised words to check. A lone capitalised word that starts a
    sentence is an ordinary word ("Payment is due"), unless it is an acronym; words every text
    has (stop words, "Inc", "LLC") are not checked."""
    names = []
    for run in _capitalised_runs(text, skip):
        words = [t.group(0) for t in run if _is_capitalised(t.group(0))]
        is_lone = len(words) == 1 and not _is_acronym(words[0])
        if is_lone and _starts_sentence(text, run[0].start()):
            continue
        checked = frozenset(w for w in map(normalise_word, words) if w not in _UNCHECKED_WORDS)
        if checked:
            names.append(Span(run[0].start(), run[-1].end(), checked))
    return names


def _capitalised_runs(text: str, skip: Sequence[Span]) -> list[list[re.Match[str]]]:
    """Capitalised words next to each other (only spaces between), with connectors ("of",
    "&") between two of them; punctuation ends a run."""
    runs: list[list[re.Match[str]]] = []
    current: list[re.Match[str]] = []
    pending: list[re.Match[str]] = []  # connectors after the run's last capitalised word
    for token in _TOKEN.finditer(text):
        if _inside(Span(token.start(), token.end(), frozenset()), skip):
            if current:
                runs.append(current)
            current, pending = [], []
            continue
        word = token.group(0)
        last = (pending or current)[-1] if current else None
        adjacent = last is not None and not text[last.end() : token.start()].strip()
        if _is_capitalised(word):
            if adjacent:
                current.extend([*pending, token])
            else:
                if current:
                    runs.append(current)
                current = [token]
            pending = []
        elif adjacent and word.lower() in _CONNECTORS:
            pending.append(token)
        else:
            if current:
                runs.append(current)
            current, pending = [], []
    if current:
        runs.append(current)
    return runs


def _starts_sentence(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t\"'“‘([")
    if not before:
        return True
    if before[-1] in ".!?:;\n":
        return True
    # A list item: "- Acme", "* Acme", "• Acme" at the start of a line.
    if before[-1] in "-*•":
        line = before[:-1].rsplit("\n", 1)[-1]
        return not line.strip()
    return False


def word_offsets(text: str) -> dict[str, int]:
    """Every normalised word of `text` (and each part of a hyphenated one) -> its first offset."""
    offsets: dict[str, int] = {}
    for match in _TOKEN.finditer(text):
        word = normalise_word(match.group(0))
        for part in (word, *word.split("-")):
            if part:
                offsets.setdefault(part, match.start())
    return offsets


def normalise_word(word: str) -> str:
    """Case folded, possessive and inner dots and apostrophes dropped: "L.L.C." -> "llc"."""
    word = word.casefold().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    return word.replace(".", "").replace("'", "").replace("&", "")


def _is_capitalised(word: str) -> bool:
    return word[0].isupper()


def _is_acronym(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def _inside(span: Span, skip: Iterable[Span]) -> bool:
    return any(span.start < other.end and other.start < span.end for other in skip)


def _without_overlaps(spans: list[Span]) -> list[Span]:
    kept: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -(s.end - s.start))):
        if kept and span.start < kept[-1].end:
            continue
        kept.append(span)
    return kept


def _date_value(groups: dict[str, str | None]) -> DateValue | None:
    month_text = (groups.get("month") or "").lower().rstrip(".")
    month = int(month_text) if month_text.isdigit() else _MONTHS.get(month_text)
    if month is None or not 1 <= month <= 12:
        return None
    year = int(groups["year"]) if groups.get("year") else None
    day_text = (groups.get("day") or "").lower()
    day: int | None = None
    if day_text:
        day = int(day_text) if day_text.isdigit() else _DAY_WORDS.get(" ".join(day_text.split()))
        if day is None or not 1 <= day <= 31:
            return None
    if year is None and day is None:
        return None
    return (year, month, day)


def _full_year(text: str) -> int:
    year = int(text)
    if len(text) == 2:
        year += 2000 if year < 70 else 1900
    return year


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def _words_value(text: str) -> int | None:
    """ "thirty-five" -> 35, "two hundred and ten" -> 210, "one million" -> 1000000."""
    total, current, seen = 0, 0, False
    for word in re.split(r"[\s-]+", text.lower()):
        if word == "and" or not word:
            continue
        if word in _NUMBER_WORD_VALUES:
            current += _NUMBER_WORD_VALUES[word]
            seen = True
        elif word == "hundred":
            current = max(current, 1) * 100
            seen = True
        elif word in _SCALES:
            total += max(current, 1) * _SCALES[word]
            current = 0
            seen = True
    return total + current if seen else None
