"""An OTC "Drug Facts" panel read by its fixed headings, in panel order: "Active ingredient",
"Purpose", "Uses", "Warnings" (with "Do not use", "Ask a doctor or pharmacist before use",
"When using this product", "Stop use and ask a doctor"), "Directions", "Other information",
"Inactive ingredients". A heading starts its line with a capital; a section runs to the next
heading; the warnings block runs to the directions."""

from __future__ import annotations

import re

from pipelines.facts.label_dosing import dose_rows
from pipelines.facts.section_text import body_value
from pipelines.facts.structured import Found, clipped, line_spans, origin_on_page
from pipelines.retrieval.evidence import DocumentSentences

_DRUG_FACTS = re.compile(r"(?im)^\s*drug\s+facts\b")
# Drug Facts headings, in panel order: (key, pattern at a line start). The first letter is a
# capital in the panel; a one-word heading stands alone on its line or before ":" or a bullet,
# so a direction that starts "Use ..." is not taken for "Uses".
_OTC_HEADINGS: tuple[tuple[str, str], ...] = (
    ("active", r"Active\s+ingredients?\b(?:\s*\([^)\n]*\))?"),
    ("purpose", r"Purposes?(?=\s*$|\s*[:■•▪●])"),
    ("uses", r"Uses?(?=\s*$|\s*[:■•▪●])"),
    ("warnings", r"Warnings?(?=\s*$|\s*[:■•▪●])"),
    ("do_not_use", r"Do\s+not\s+use\b"),
    (
        "ask_pharmacist",
        r"Ask\s+a\s+doctor\s+or\s+pharmacist\s+before\s+use\b(?:\s+if\s+you\s+are)?",
    ),
    ("ask_doctor", r"Ask\s+a\s+doctor\s+before\s+use\b(?:\s+if\s+you(?:\s+have)?)?"),
    ("when_using", r"When\s+using\s+this\s+product\b"),
    ("stop_use", r"Stop\s+use\s+and\s+ask\s+a\s+doctor\b(?:\s+if)?"),
    ("pregnant", r"If\s+pregnant\s+or\s+breast[- ]?feeding\b"),
    ("keep_out", r"Keep\s+out\s+of\s+reach\s+of\s+children\b"),
    ("directions", r"Directions(?=\s*$|\s*[:■•▪●])"),
    ("other", r"Other\s+information\b"),
    ("inactive", r"Inactive\s+ingredients?\b"),
    ("questions", r"Questions(?:\s+or\s+comments)?\b"),
)
_OTC_FIELDS = {
    "uses": "indications",
    "directions": "dosage",
    "do_not_use": "contraindications",
    "ask_pharmacist": "interactions",
}
_OTC_TITLES = {
    "uses": "Uses",
    "directions": "Directions",
    "do_not_use": "Do not use",
    "ask_pharmacist": "Ask a doctor or pharmacist before use",
    "warnings": "Warnings",
    "active": "Active ingredient",
}
# The warnings block of a Drug Facts panel ends where the directions begin.
_OTC_WARNINGS_END = ("directions", "other", "inactive", "questions")
_AMOUNT_START = re.compile(r"\s\d")


def is_drug_facts(text: str) -> bool:
    """Whether the document opens with a Drug Facts panel."""
    return _DRUG_FACTS.search(text[:3000]) is not None


def otc_headings(text: str) -> list[tuple[str, int, int]]:
    """(key, heading start, heading end) of each Drug Facts heading, in document order."""
    found = []
    for start, end in line_spans(text, 0, len(text)):
        line = text[start:end]
        for key, pattern in _OTC_HEADINGS:
            match = re.match(pattern, line, re.IGNORECASE)
            if match and line[:1].isupper():
                found.append((key, start, start + match.end()))
                break
    return found


def read_drug_facts(sentences: DocumentSentences) -> dict[str, Found]:
    """The label fields a Drug Facts panel's headings give."""
    text = sentences.text
    headings = otc_headings(text)
    found: dict[str, Found] = {}
    for index, (key, start, body_start) in enumerate(headings):
        body_end = headings[index + 1][1] if index + 1 < len(headings) else len(text)
        if not re.search(r"[A-Za-z]{3}", text[body_start:body_end]):
            continue
        where = f"Drug Facts: {_OTC_TITLES.get(key, key)}"
        field = _OTC_FIELDS.get(key)
        if field and field not in found:
            span = clipped(text, start, body_end)
            value = body_value(text, body_start, span[1])
            found[field] = Found(value, value, (span,), origin_on_page(where, sentences, start))
            if field == "dosage":
                rows = dose_rows(sentences, body_start, body_end)
                if rows:
                    dosage = found[field]
                    found[field] = Found(value, value, dosage.spans, dosage.origin, tuple(rows))
        if key == "warnings" and "warnings" not in found:
            later = [h for h in headings[index + 1 :] if h[0] in _OTC_WARNINGS_END]
            end = later[0][1] if later else body_end
            span = clipped(text, start, end)
            value = body_value(text, body_start, span[1])
            found["warnings"] = Found(
                value, value, (span,), origin_on_page(where, sentences, start)
            )
        if key == "active" and "drug_name" not in found:
            name = _otc_product(text, body_start, body_end)
            if name is not None:
                span = clipped(text, start, name[1])
                found["drug_name"] = Found(
                    name[0], name[0].casefold(), (span,), origin_on_page(where, sentences, start)
                )
    return found


def _otc_product(text: str, start: int, end: int) -> tuple[str, int] | None:
    """The active ingredient's name (the words before its strength) and where its line ends."""
    for line_start, line_end in line_spans(text, start, end):
        line = text[line_start:line_end]
        amount = _AMOUNT_START.search(line)
        name = (line[: amount.start()] if amount else "").strip(" ,:")
        if name and re.search(r"[A-Za-z]{3}", name) and not line.startswith("("):
            return name, line_end
    return None
