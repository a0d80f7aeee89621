"""Is a text a verbatim span of the document? Whitespace and line-end hyphenation do not count
(PDF text wraps lines inside sentences and splits words there: "gov-\\nerned"), nor do the
typographic forms of quotation marks, apostrophes and dashes; every letter, digit and word does.

Used on the text a model's answer puts in quotation marks: a quote that the document does not
hold is made up, and is never shown as a quote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A quoted span of at least this many words is checked: a quoted defined term of one word
# ("Agreement") says nothing a reader would take for the document's wording.
MIN_QUOTED_WORDS = 2
_QUOTED = re.compile(r"“([^“”\n]+?)”|\"([^\"\n]+?)\"")
_TYPOGRAPHY = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-"})
_LINE_HYPHEN = re.compile(r"(?<=\w)[-\u00ad]\s*\n\s*(?=\w)")
_SPACE = re.compile(r"\s+")
_EDGE_PUNCTUATION = " .,;:!?'\""


@dataclass(frozen=True)
class QuotedSpan:
    """Text an answer puts in quotation marks; [start, end) of the answer."""

    text: str
    start: int
    end: int


def normalized(text: str) -> str:
    """`text` with hyphenation at line ends undone, typographic marks made plain and every run
    of whitespace one space."""
    text = _LINE_HYPHEN.sub("", text.replace("\u00ad", "")).translate(_TYPOGRAPHY)
    return _SPACE.sub(" ", text).strip()


def quoted_spans(answer: str) -> list[QuotedSpan]:
    """What `answer` puts in quotation marks, of at least MIN_QUOTED_WORDS words."""
    found = []
    for match in _QUOTED.finditer(answer):
        group = 1 if match.group(1) is not None else 2
        inner = match.group(group)
        if len(inner.split()) >= MIN_QUOTED_WORDS:
            found.append(QuotedSpan(inner, match.start(group), match.end(group)))
    return found


class VerbatimIndex:
    """A document's text normalized once, for looking up many quoted spans."""

    def __init__(self, document: str) -> None:
        self.text = normalized(document)

    def holds(self, quoted: str) -> bool:
        """Whether `quoted` (end punctuation aside) is a span of the document."""
        needle = normalized(quoted).strip(_EDGE_PUNCTUATION)
        return bool(needle) and needle in self.text


def fabricated_quotes(answer: str, document: VerbatimIndex | str) -> list[str]:
    """The spans `answer` quotes that `document` does not hold, as written in the answer."""
    spans = quoted_spans(answer)
    if not spans:
        return []
    index = document if isinstance(document, VerbatimIndex) else VerbatimIndex(document)
    return [span.text for span in spans if not index.holds(span.text)]
