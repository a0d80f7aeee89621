"""A drug label's key facts read by its section headings.

Two layouts cover US labels. Prescribing information (SPL, the PLR format) has a HIGHLIGHTS
block whose headings are bare capitals ("DOSAGE AND ADMINISTRATION"), a contents list, then the
full sections, numbered ("2 DOSAGE AND ADMINISTRATION", subsections "2.1 ..."); a boxed warning
is headed "WARNING: <TOPIC>" in capitals, in the highlights and again before section 1. Older
labels use the same capitalised titles without numbers. OTC "Drug Facts" panels have their own
fixed headings ("Active ingredient", "Uses", "Warnings", "Do not use", "Directions"):
pipelines.facts.drug_facts reads those.

A section runs from its heading to the next heading of any kind; a heading in the contents list
(between "FULL PRESCRIBING INFORMATION: CONTENTS" and "FULL PRESCRIBING INFORMATION") opens
nothing. A field's value is its section's first words (the highlights' version where the label
has highlights: it is the label's own summary), quoted from the heading on; the dose table comes
from the full section 2 (pipelines.facts.label_dosing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.facts.drug_facts import is_drug_facts, read_drug_facts
from pipelines.facts.label_dosing import dose_rows
from pipelines.facts.section_text import body_value
from pipelines.facts.structured import Found, clipped, line_spans, origin_on_page, readable
from pipelines.retrieval.evidence import DocumentSentences

# Section titles of prescribing information, and the field each one gives (None: a section
# that only ends the one before it).
SPL_TITLES: dict[str, str | None] = {
    "INDICATIONS AND USAGE": "indications",
    "INDICATIONS & USAGE": "indications",
    "INDICATIONS": "indications",
    "DOSAGE AND ADMINISTRATION": "dosage",
    "DOSAGE & ADMINISTRATION": "dosage",
    "CONTRAINDICATIONS": "contraindications",
    "WARNINGS AND PRECAUTIONS": "warnings",
    "WARNINGS": "warnings",
    "PRECAUTIONS": None,
    "DRUG INTERACTIONS": "interactions",
    "DOSAGE FORMS AND STRENGTHS": None,
    "ADVERSE REACTIONS": None,
    "USE IN SPECIFIC POPULATIONS": None,
    "DRUG ABUSE AND DEPENDENCE": None,
    "OVERDOSAGE": None,
    "DESCRIPTION": None,
    "CLINICAL PHARMACOLOGY": None,
    "NONCLINICAL TOXICOLOGY": None,
    "CLINICAL STUDIES": None,
    "REFERENCES": None,
    "HOW SUPPLIED": None,
    "HOW SUPPLIED/STORAGE AND HANDLING": None,
    "STORAGE AND HANDLING": None,
    "PATIENT COUNSELING INFORMATION": None,
    "RECENT MAJOR CHANGES": None,
    "MEDICATION GUIDE": None,
    "PATIENT INFORMATION": None,
    "INSTRUCTIONS FOR USE": None,
    "HIGHLIGHTS OF PRESCRIBING INFORMATION": None,
    "FULL PRESCRIBING INFORMATION": None,
}
_CONTENTS = re.compile(r"^FULL PRESCRIBING INFORMATION:\s*CONTENTS\b|^CONTENTS\*?$")
_FULL_START = re.compile(r"^FULL PRESCRIBING INFORMATION$")
_HIGHLIGHTS = re.compile(r"^HIGHLIGHTS OF PRESCRIBING INFORMATION$")
_NUMBERED = re.compile(r"^(\d{1,2})\s+([A-Z][A-Z ,&/()-]{3,80})$")
# "WARNING: LACTIC ACIDOSIS", "BOXED WARNING", a lone "WARNING"; not "WARNINGS" (a section).
_BOXED = re.compile(
    r"^(?:BOXED\s+WARNINGS?(?:\s*:.*)?|WARNINGS?\s*:\s*[A-Z0-9][A-Z0-9 ,;:()/'’-]*|WARNING)$"
)
_SUBSECTION = re.compile(r"^\d{1,2}\.\d{1,2}\s+\S")
# "...information needed to use ZORVATIN TABLETS safely and effectively": the highlights'
# standard opening names the product.
_PRODUCT = re.compile(
    r"needed\s+to\s+use\s+(?P<name>\S.{1,150}?)\s+safely\s+and\s+effectively", re.DOTALL
)
_BOXED_POINTER = re.compile(r"^\s*see\s+full\s+prescribing\s+information\b", re.IGNORECASE)


@dataclass(frozen=True)
class Section:
    """One section of a label: `title` as printed (without its number), `key` the field it
    gives (None for none), its heading's and body's document offsets, and where it stands."""

    title: str
    key: str | None
    number: str | None
    heading_start: int
    body_start: int
    body_end: int
    in_highlights: bool

    @property
    def label(self) -> str:
        number = f"{self.number} " if self.number else ""
        return f"{number}{self.title}"


def read_label(sentences: DocumentSentences) -> dict[str, Found]:
    """The label fields its headings give: SPL sections, else a Drug Facts panel."""
    text = sentences.text
    sections = spl_sections(text)
    if any(section.key for section in sections):
        return _spl_facts(sections, sentences)
    if is_drug_facts(text):
        return read_drug_facts(sentences)
    return {}


def _heading(line: str) -> tuple[str, str | None, str | None] | None:
    """(title, field key, number) of a heading line, or None."""
    if _BOXED.match(line) and line.upper() == line:
        return line, "boxed_warning", None
    if line in SPL_TITLES:
        return line, SPL_TITLES[line], None
    numbered = _NUMBERED.match(line)
    if numbered:
        title = " ".join(numbered.group(2).split())
        return title, SPL_TITLES.get(title), numbered.group(1)
    return None


def spl_sections(text: str) -> list[Section]:
    """Every section of prescribing information with a body, in document order."""
    headings: list[tuple[int, int, str, str | None, str | None, bool]] = []
    in_contents = in_highlights = False
    for start, end in line_spans(text, 0, len(text)):
        line = " ".join(text[start:end].split())
        if _CONTENTS.match(line):
            in_contents, in_highlights = True, False
            headings.append((start, end, line, None, None, False))
            continue
        if _FULL_START.match(line):
            in_contents = in_highlights = False
            headings.append((start, end, line, None, None, False))
            continue
        if _HIGHLIGHTS.match(line):
            in_highlights = True
        if in_contents:
            continue
        found = _heading(line)
        if found is not None:
            headings.append((start, end, *found, in_highlights))
    sections = []
    for index, (start, end, title, key, number, highlights) in enumerate(headings):
        body_end = headings[index + 1][0] if index + 1 < len(headings) else len(text)
        body = text[end:body_end]
        if not re.search(r"[A-Za-z]{3}", body):
            continue
        sections.append(Section(title, key, number, start, end, body_end, highlights))
    return sections


def _spl_facts(sections: list[Section], sentences: DocumentSentences) -> dict[str, Found]:
    text = sentences.text
    found: dict[str, Found] = {}
    for section in sections:  # document order: the highlights' version comes first
        if section.key is None or section.key in found:
            continue
        if section.key == "boxed_warning":
            found[section.key] = _boxed_warning(section, sentences)
            continue
        where = ("highlights, " if section.in_highlights else "section ") + section.label
        found[section.key] = _section_value(section, sentences, where)
    dosing = [s for s in sections if s.key == "dosage"]
    if "dosage" in found and dosing:
        full = [s for s in dosing if not s.in_highlights] or dosing
        rows = dose_rows(sentences, full[0].body_start, full[0].body_end)
        if rows:
            dosage = found["dosage"]
            found["dosage"] = Found(
                dosage.value, dosage.normalized, dosage.spans, dosage.origin, tuple(rows)
            )
    name = _spl_product(text, sentences)
    if name is not None:
        found["drug_name"] = name
    return found


def _section_value(section: Section, sentences: DocumentSentences, where: str) -> Found:
    text = sentences.text
    start, end = clipped(text, section.heading_start, section.body_end)
    value = body_value(text, section.body_start, end)
    return Found(value, value, ((start, end),), origin_on_page(where, sentences, start))


def _boxed_warning(section: Section, sentences: DocumentSentences) -> Found:
    """The boxed warning's heading and its first statement (past a "see full prescribing
    information" pointer)."""
    text = sentences.text
    heading = " ".join(section.title.split())
    body_start = section.body_start
    for start, end in line_spans(text, section.body_start, section.body_end)[:2]:
        line = text[start:end]  # a long topic wraps onto a second line of capitals
        if line.upper() != line or len(line) > 80 or not re.search(r"[A-Z]{3}", line):
            break
        heading, body_start = f"{heading} {' '.join(line.split())}", end
    section = Section(
        section.title,
        section.key,
        section.number,
        section.heading_start,
        body_start,
        section.body_end,
        section.in_highlights,
    )
    body_spans = sentences.overlapping(section.body_start, section.body_end)
    statement = next(
        (
            (max(s, section.body_start), min(e, section.body_end))
            for s, e in body_spans
            if not _BOXED_POINTER.match(text[max(s, section.body_start) : e])
            and re.search(r"[a-z]{3}", text[s:e])
        ),
        None,
    )
    where = origin_on_page(
        "boxed warning" + (" (highlights)" if section.in_highlights else ""),
        sentences,
        section.heading_start,
    )
    if statement is None:
        span = clipped(text, section.heading_start, section.body_start)
        return Found(heading, heading, (span,), where)
    span = clipped(text, section.heading_start, statement[1])
    value = f"{heading}. {readable(text[statement[0] : statement[1]], max_chars=280)}"
    return Found(value, heading, (span,), where)


def _spl_product(text: str, sentences: DocumentSentences) -> Found | None:
    match = _PRODUCT.search(text[:6000])
    if match is None:
        return None
    name = " ".join(match.group("name").split())
    start, end = match.start("name"), match.end("name")
    sentence = sentences.overlapping(start, end)
    span = (sentence[0][0], sentence[-1][1]) if sentence else (start, end)
    where = origin_on_page("highlights", sentences, start)
    return Found(name, name.casefold(), (clipped(text, *span),), where)
