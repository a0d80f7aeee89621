"""Periods of time written out in documents ("thirty (30) days", "5 years", "one-year"), found
and normalised to ISO 8601 durations ("P30D", "P5Y").

Contracts write a number in words, in digits, or both ("ninety (90) days"); when both are there
the digits decide. "annual" and "annually" are one year. Qualifiers between the number and the
unit ("30 calendar days", "three (3) consecutive years") are allowed. Business days normalise
as days (ISO 8601 has no business day); the value as written keeps the word.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_UNITS = {"day": "D", "week": "W", "month": "M", "year": "Y"}
_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70}
_TENS.update({"eighty": 80, "ninety": 90})
_QUALIFIERS = r"(?:(?:calendar|business|working|consecutive|full|additional|successive|month)\s+)"


def _number_words() -> dict[str, int]:
    words = {word: n for n, word in enumerate(_ONES)}
    for tens, value in _TENS.items():
        words[tens] = value
        for n, one in enumerate(_ONES[1:10], start=1):
            words[f"{tens}-{one}"] = value + n
            words[f"{tens} {one}"] = value + n
    words.update({"a": 1, "an": 1, "one hundred": 100, "one hundred twenty": 120})
    words.update({"one hundred eighty": 180, "three hundred sixty-five": 365})
    return words


NUMBER_WORDS = _number_words()


@dataclass(frozen=True)
class DurationMention:
    """A period written in a text: text[start:end] reads as `amount` `unit`s."""

    amount: int
    unit: str  # "day", "week", "month" or "year"
    start: int
    end: int

    @property
    def iso(self) -> str:
        return f"P{self.amount}{_UNITS[self.unit]}"


@functools.cache
def _pattern() -> re.Pattern[str]:
    words = "|".join(sorted((w for w in NUMBER_WORDS if w not in ("a", "an")), key=len)[::-1])
    number = rf"(?:(?P<word>{words})\s*(?:\(\s*(?P<both>\d{{1,4}})\s*\))?|(?P<digits>\d{{1,4}}))"
    unit = r"(?P<unit>day|week|month|year)s?\b"
    annual = r"(?P<annual>annual(?:ly)?)\b"
    return re.compile(
        rf"(?<![\w.]){number}[\s-]*{_QUALIFIERS}*{unit}|(?<![\w-]){annual}", re.IGNORECASE
    )


def find_durations(text: str) -> list[DurationMention]:
    """Every period of time in `text`, in order."""
    found = []
    for match in _pattern().finditer(text):
        if match.group("annual"):
            found.append(DurationMention(1, "year", match.start(), match.end()))
            continue
        if match.group("both"):
            amount = int(match.group("both"))
        elif match.group("digits"):
            amount = int(match.group("digits"))
        else:
            amount = NUMBER_WORDS[" ".join(match.group("word").lower().split())]
        if amount > 0:
            found.append(
                DurationMention(amount, match.group("unit").lower(), match.start(), match.end())
            )
    return found
