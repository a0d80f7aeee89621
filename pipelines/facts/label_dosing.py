"""A label's doses as rows: indication, population, dose, each row with its page and the
document characters it quotes.

Read from the DOSAGE AND ADMINISTRATION section (or a Drug Facts panel's Directions): every
statement that gives an amount ("500 mg", "20 mg/kg/day", "1 tablet") is a row. A statement is
a sentence, or, in a table (a sentence whose short lines each give an amount), a line. The
population is the one the statement names ("adults", "pediatric patients 3 months and
older", "patients with severe renal impairment"), else its subsection's; the indication is
what the subsection title names besides dosing words and the population ("Dosing for H.
pylori Infection"), or a table row's words before its population.
"""

from __future__ import annotations

import re
from typing import Any

from pipelines.facts.structured import line_spans, readable
from pipelines.retrieval.evidence import DocumentSentences

MAX_ROWS = 12
MAX_DOSE_CHARS = 220
_AMOUNT = re.compile(
    r"(?<![\w.])\d[\d,.]*(?:\s*(?:to|-|–)\s*\d[\d,.]*)?\s*(?:mg|g|grams?|mcg|µg|micrograms?|mL|"
    r"units?|IU|mEq|mmol|tablets?|capsules?|caplets?|drops?|puffs?|sprays?|teaspoons?|"
    r"tablespoons?)(?![\w])(?:\s*/\s*(?:kg|m2|m²|day|dose|hour|h))*",
    re.IGNORECASE,
)
_AGE = r"(?:\s+(?:aged?\s+|ages\s+|from\s+|under\s+|over\s+|younger\s+than\s+|older\s+than\s+|[<>≤≥]\s*)?\d+(?:\s*(?:to|-|–)\s*\d+)?\s+(?:years?|months?|weeks?|days?)(?:\s+of\s+age)?(?:\s+(?:and|or)\s+(?:older|over|above|younger))?)?"
POPULATION = re.compile(
    r"\b(?:adults?(?:\s+and\s+(?:pediatric\s+patients|adolescents|children))?(?:\s+patients)?"
    + _AGE
    + r"|(?:pediatric|paediatric)\s+patients"
    + _AGE
    + r"|children"
    + _AGE
    + r"|adolescents"
    + _AGE
    + r"|neonates(?:\s+and\s+infants)?"
    + _AGE
    + r"|infants"
    + _AGE
    + r"|(?:elderly|geriatric)(?:\s+patients)?"
    + r"|patients\s+(?:with|on)\s+(?:(?:mild|moderate|severe|end-stage)(?:\s+(?:or|to)\s+"
    r"(?:mild|moderate|severe))?\s+)?(?:renal|hepatic|kidney|liver)\s+(?:impairment|disease)"
    r"|(?:renal|hepatic)\s+impairment)",
    re.IGNORECASE,
)
_SUBSECTION = re.compile(r"(?m)^\d{1,2}\.\d{1,2}\s+(?P<title>\S.*)$")
_DOSING_WORDS = re.compile(
    r"\b(?:recommended|usual|general|important|adult|pediatric|dosage|dosing|doses?|"
    r"administration|and|for|in|of|the|use|information|instructions|recommendations?)\b",
    re.IGNORECASE,
)


def dose_rows(sentences: DocumentSentences, start: int, end: int) -> list[dict[str, Any]]:
    """The dose rows of the section at document characters [start, end), in document order."""
    text = sentences.text
    titles = _subsection_titles(text, start, end)
    rows: list[dict[str, Any]] = []
    for statement_start, statement_end, in_table in _statements(sentences, start, end):
        while statement_start < statement_end and text[statement_start].isspace():
            statement_start += 1
        heading = _SUBSECTION.match(text[statement_start:statement_end])
        if heading is not None:  # the sentence begins with its subsection's heading line
            title_end = text.find("\n", statement_start, statement_end)
            statement_start = title_end + 1 if title_end > 0 else statement_start
        statement = text[statement_start:statement_end]
        amount = _AMOUNT.search(statement)
        if amount is None:
            continue
        title = next((t for at, t in reversed(titles) if at <= statement_start), "")
        population = POPULATION.search(statement) or POPULATION.search(title)
        indication = _indication(title, population.group(0) if population else "")
        if in_table:
            lead = statement[: population.start() if population else amount.start()]
            if population and population.start() < amount.start() and len(lead.strip()) >= 3:
                indication = lead.strip(" :,-")
            dose = readable(statement[amount.start() :], max_chars=MAX_DOSE_CHARS)
        else:
            dose = readable(statement, max_chars=MAX_DOSE_CHARS)
        rows.append(
            {
                "indication": readable(indication, max_chars=80),
                "population": " ".join(population.group(0).split()) if population else "",
                "dose": dose,
                "page": sentences.page_of(statement_start),
                "start_char": statement_start,
                "end_char": statement_end,
            }
        )
        if len(rows) == MAX_ROWS:
            break
    return rows


def _subsection_titles(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """(offset, title) of each numbered subsection heading ("2.3 Dosing for H. pylori
    Infection"), with the short lines it wraps onto."""
    lines = line_spans(text, start, end)
    titles = []
    for index, (line_start, line_end) in enumerate(lines):
        match = _SUBSECTION.match(text[line_start:line_end])
        if match is None:
            continue
        title = match.group("title")
        for next_start, next_end in lines[index + 1 : index + 3]:
            wrapped = text[next_start:next_end]
            if len(wrapped) > 25 or wrapped.endswith((":", ".")) or _AMOUNT.search(wrapped):
                break
            title += " " + wrapped
        titles.append((line_start, title))
    return titles


def _indication(title: str, population: str) -> str:
    """What a subsection title names besides dosing words and the population."""
    rest = title.replace(population, " ") if population else title
    rest = POPULATION.sub(" ", rest)
    rest = _DOSING_WORDS.sub(" ", rest)
    rest = " ".join(rest.split()).strip(" :,-()")
    return rest if re.search(r"[A-Za-z]{3}", rest) else ""


def _statements(sentences: DocumentSentences, start: int, end: int) -> list[tuple[int, int, bool]]:
    """(start, end, is a table row) of each sentence, or each line of a table, in the range."""
    text = sentences.text
    found = []
    for sentence_start, sentence_end in sentences.overlapping(start, end):
        sentence_start, sentence_end = max(sentence_start, start), min(sentence_end, end)
        lines = line_spans(text, sentence_start, sentence_end)
        with_amounts = [span for span in lines if _AMOUNT.search(text[span[0] : span[1]])]
        short = [span for span in lines if span[1] - span[0] < 60]
        # Lines that each start with a population ("adults: take 1 tablet", "children under
        # 12 years: ask a doctor") are rows too, as a Drug Facts panel's directions are.
        by_population = [span for span in lines if POPULATION.match(text[span[0] : span[1]])]
        if len(by_population) >= 2 or (len(with_amounts) >= 2 and 2 * len(short) >= len(lines)):
            found += [(s, e, True) for s, e in with_amounts]
        elif with_amounts:
            found.append((sentence_start, sentence_end, False))
    return found
