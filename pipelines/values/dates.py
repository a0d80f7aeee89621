"""Calendar dates written out in documents, found and normalised to ISO 8601 ("2018-12-19").

Contracts and court records write dates many ways: "December 19, 2018", "Dec. 19, 2018",
"19 December 2018", "the 19th day of December, 2018", "2018-12-19", "12/19/2018",
"19.12.2018". Only complete dates count (a day, a month and a year that make a real date):
"[•], 2020" or "May 2009" is no date, so a placeholder is never taken for one.

Numeric dates with slashes or dashes are read month first (the US convention of the filings we
see) unless the first number cannot be a month; dotted ones ("19.12.2018") day first.
PDF text sometimes breaks an ordinal ("19t h day of"): spaces inside the suffix are allowed.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass

MONTHS = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
}
_MONTH_ABBREVIATIONS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_DAY_WORDS = [
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
]
DAY_WORDS = {word: number for number, word in enumerate(_DAY_WORDS, start=1)}
DAY_WORDS.update({f"twenty-{word}": 20 + n for n, word in enumerate(_DAY_WORDS[:9], start=1)})
DAY_WORDS.update({"thirtieth": 30, "thirty-first": 31})


@dataclass(frozen=True)
class DateMention:
    """A complete date written in a text: text[start:end] reads as `value`."""

    value: dt.date
    start: int
    end: int

    @property
    def iso(self) -> str:
        return self.value.isoformat()


def _month_pattern() -> str:
    names = sorted([*MONTHS, *_MONTH_ABBREVIATIONS], key=len, reverse=True)
    return r"(?P<{g}>" + "|".join(names) + r")\.?"


# A day number with an ordinal suffix that PDF text may split ("19t h"), or a day word.
_DAY = r"(?P<{g}>\d{{1,2}})(?:\s?(?:s\s?t|n\s?d|r\s?d|t\s?h))?"
_DAY_WORD = r"(?P<{g}>" + "|".join(sorted(DAY_WORDS, key=len, reverse=True)) + ")"
_YEAR = r"(?P<{g}>\d{{4}})"


def _named(template: str, group: str) -> str:
    return template.format(g=group)


@functools.cache
def _patterns() -> tuple[re.Pattern[str], ...]:
    month = _month_pattern()
    day_or_word = f"(?:{_named(_DAY, 'd')}|{_named(_DAY_WORD, 'dw')})"
    forms = (
        # 2018-12-19
        r"(?<!\d)(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})(?!\d)",
        # the 19th day of December, 2018 / 19th of December 2018 / first day of June, 2001
        day_or_word
        + r"\s+(?:day\s+)?(?:of\s+)?"
        + _named(month, "mn")
        + r",?\s+(?:in\s+the\s+year\s+)?"
        + _named(_YEAR, "y"),
        # December 19, 2018 / Dec. 19th, 2018
        _named(month, "mn") + r"\s+" + _named(_DAY, "d") + r",?\s+" + _named(_YEAR, "y"),
        # 19 December 2018
        _named(_DAY, "d") + r"\s+" + _named(month, "mn") + r",?\s+" + _named(_YEAR, "y"),
        # 12/19/2018, 12-19-18 (month first unless impossible)
        r"(?<![\d/.-])(?P<a>\d{1,2})[/-](?P<b>\d{1,2})[/-](?P<y>\d{4}|\d{2})(?![\d/-])",
        # 19.12.2018 (day first)
        r"(?<![\d.])(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})(?![\d.])",
    )
    return tuple(re.compile(rf"(?<![\w]){form}(?![\w])", re.IGNORECASE) for form in forms)


def find_dates(text: str) -> list[DateMention]:
    """Every complete date in `text`, in order of position, none overlapping (the earliest and
    then longest match wins)."""
    found: list[DateMention] = []
    for pattern in _patterns():
        for match in pattern.finditer(text):
            value = _value(match)
            if value is not None:
                found.append(DateMention(value, match.start(), match.end()))
    found.sort(key=lambda m: (m.start, -(m.end - m.start)))
    kept: list[DateMention] = []
    for mention in found:
        if kept and mention.start < kept[-1].end:
            continue
        kept.append(mention)
    return kept


def parse_date(text: str) -> dt.date | None:
    """The first complete date written in `text`, or None."""
    found = find_dates(text)
    return found[0].value if found else None


def _value(match: re.Match[str]) -> dt.date | None:
    groups = {k: v for k, v in match.groupdict().items() if v is not None}
    year = int(groups["y"])
    if len(groups["y"]) == 2:
        year += 2000 if year < 50 else 1900
    if "a" in groups:
        first, second = int(groups["a"]), int(groups["b"])
        month, day = (first, second) if first <= 12 else (second, first)
    else:
        if "mn" in groups:
            name = groups["mn"].lower().rstrip(".")
            month = MONTHS.get(name) or _MONTH_ABBREVIATIONS.get(name, 0)
        else:
            month = int(groups["m"])
        day = DAY_WORDS[groups["dw"].lower()] if "dw" in groups else int(groups["d"])
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None
