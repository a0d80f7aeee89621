"""An opinion's disposition read from its conclusion: what the court orders at the end of the
majority opinion (before any concurrence or dissent).

The order is written in one of two ways, in every US court: a line of its own in capitals
("AFFIRMED.", "REVERSED AND REMANDED.", "MODIFIED AND AFFIRMED."), or the court speaking in the
last paragraphs ("For these reasons, we affirm the judgment.", "The appeal is dismissed.").
The formal line wins; else the last such sentence of the majority opinion.
"""

from __future__ import annotations

import re

from pipelines.facts.judges import opening_end
from pipelines.facts.structured import Found, clipped, origin_on_page
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.values.dispositions import DISPOSITION, disposition_of

# How far before the majority's end its conclusion is looked for.
CONCLUSION_CHARS = 6_000
_FORMAL_LINE = re.compile(
    r"(?m)^\s*(?:(?:JUDGMENT|ORDER|DECISION|PETITION|APPEAL|MOTION)\s+)?"
    r"(?:AFFIRMED|REVERSED|REMANDED|VACATED|DISMISSED|MODIFIED|DENIED|GRANTED|SET\s+ASIDE)"
    r"(?:[ ,;]+(?:AND\s+|IN\s+PART|AS\s+MODIFIED|IN\s+PART\s+AND)*\s*(?:AFFIRMED|REVERSED|"
    r"REMANDED|VACATED|DISMISSED|MODIFIED|DENIED|GRANTED|IN\s+PART|FOR\s+[A-Z ]+)?)*"
    r"\s*[.;]?\s*$"
)
# The court speaking: "we affirm", "this Court reverses", "the judgment ... is affirmed",
# "the appeal is dismissed", "it is ordered that ... be vacated".
_ORDERS = re.compile(
    r"\b(?:we|this\s+court|the\s+court)\s+(?:\w+\s+){0,3}?(?:affirm|revers|remand|vacat|dismiss|"
    r"modif|den(?:y|ies)|grant|set\s+aside)\w*"
    r"|\b(?:judgment|order|decision|appeal|petition|motion|case|conviction|sentence|ruling)s?\b"
    r"[^.;]{0,160}?\b(?:is|are|be|shall\s+be|must\s+be|stands?)\s+(?:hereby\s+|therefore\s+|"
    r"accordingly\s+|thus\s+)?(?:affirm|revers|remand|vacat|dismiss|modif|denied|granted|set\s+aside)\w*",
    re.IGNORECASE,
)
# A separate opinion begins: "SMITH, Circuit Judge, concurring.", "JUSTICE DOE, dissenting."
_SEPARATE = re.compile(
    r"(?m)^(?:(?:CHIEF\s+)?JUSTICE\s+[A-Z][A-Za-z'’-]+|[A-Z][A-Za-z'’-]+,\s+(?:Chief\s+|Senior\s+)?"
    r"(?:Circuit\s+|District\s+)?(?:Judge|Justice|J\.|C\.\s?J\.))"
    r",?\s+(?:with\s+whom\s+[^,]+,\s+)?(?:concurring|dissenting)\b"
    r"|^[—–-]*\s*(?:Concurring|Dissenting)\s+Opinions?\s+Follows?\b"
)


def read_disposition(sentences: DocumentSentences) -> Found | None:
    """The outcome the majority opinion orders, with the sentence or line that orders it."""
    text = sentences.text
    body_start = opening_end(text)
    separate = _SEPARATE.search(text, body_start)
    end = separate.start() if separate else len(text)
    start = max(body_start, end - CONCLUSION_CHARS)
    formal = [m for m in _FORMAL_LINE.finditer(text, start, end) if m.group(0).strip()]
    if formal:
        line = formal[-1]
        span = clipped(text, line.start(), line.end())
        return _found(text[span[0] : span[1]], span, "disposition line", sentences)
    for sentence_start, sentence_end in reversed(sentences.overlapping(start, end)):
        sentence = text[sentence_start:sentence_end]
        order = _ORDERS.search(sentence)
        if order is None:
            continue
        span = clipped(text, sentence_start, min(sentence_end, end))
        # What the court orders from its verb on: "we reverse ... and remand ...".
        return _found(sentence[order.start() :], span, "conclusion", sentences)
    return None


def outcomes(text: str) -> list[str]:
    """The outcomes `text` orders, in written order: ["reversed", "remanded"]."""
    seen: list[str] = []
    for match in DISPOSITION.finditer(text):
        outcome = disposition_of(match) + (" in part" if match.group("part") else "")
        if outcome not in seen:
            seen.append(outcome)
    return seen


def _found(
    ordering: str, span: tuple[int, int], where: str, sentences: DocumentSentences
) -> Found | None:
    said = outcomes(ordering)
    if not said:
        return None
    value = " and ".join(said)
    return Found(value, value, (span,), origin_on_page(where, sentences, span[0]))
