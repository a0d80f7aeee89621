"""Where an opinion's body begins and who decided it: the panel of its caption ("Before Smith,
Chief Judge, Jones and Lee, Circuit Judges.") or its author's line ("JUSTICE DOE delivered the
opinion of the Court.", "DOE, Justice."), which also ends the caption."""

from __future__ import annotations

import re

from pipelines.facts.structured import Found, clipped, origin_on_page
from pipelines.retrieval.evidence import DocumentSentences

MAX_OPENING_CHARS = 12_000
# Where the opinion's body begins: its author's line.
_AUTHOR = re.compile(
    r"(?m)^(?:(?:CHIEF\s+)?JUSTICE\s+(?P<justice>[A-Z][A-Za-z'’-]+)\s+delivered\b|"
    r"(?P<name>[A-Z][A-Za-z'’-]+),\s+(?P<title>(?:Chief\s+|Senior\s+|Associate\s+)?"
    r"(?:Circuit\s+|District\s+|Appellate\s+)?(?:Judge|Justice)|C\.\s?J\.|J\.)"
    r"(?:,\s+delivered\b|\.(?:\s|$)))|^PER\s+CURIAM\b"
)
_PANEL = re.compile(
    r"(?m)^\s*(?:Before|BEFORE|Present|PRESENT)\s*:?\s*\n*\s*(?P<panel>[^\n].{3,400}?\.)(?:\s|$)",
    re.DOTALL,
)
_JUDGE_TITLE = re.compile(
    r"\b(?:Chief|Senior|Associate|Circuit|District|Magistrate|Bankruptcy|Appellate)?\s*"
    r"(?:Circuit\s+)?(?:Judges?|Justices?|JJ\.|J\.)",
    re.IGNORECASE,
)


def opening_end(text: str) -> int:
    """Where the opinion's body begins (its author's line), else MAX_OPENING_CHARS in."""
    match = _AUTHOR.search(text, 0, min(len(text), 3 * MAX_OPENING_CHARS))
    if match is not None:
        return match.start()
    return min(len(text), MAX_OPENING_CHARS)


def line_of(text: str, start: int, end: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return clipped(text, line_start, len(text) if line_end < 0 else line_end)


def read_judges(sentences: DocumentSentences, end: int) -> Found | None:
    """The panel ("Before A, Chief Judge, B and C, Circuit Judges."), else the opinion's author
    ("JUSTICE A delivered the opinion", "A, Justice.")."""
    text = sentences.text
    panel = _PANEL.search(text, 0, end)
    if panel is not None:
        names = _panel_names(panel.group("panel"))
        if names:
            span = clipped(text, panel.start(), panel.end("panel"))
            value = "; ".join(names)
            return Found(value, value, (span,), origin_on_page("caption", sentences, span[0]))
    author = _AUTHOR.search(text, 0, min(len(text), 3 * MAX_OPENING_CHARS))
    if author is None or not (author.group("justice") or author.group("name")):
        return None
    if author.group("justice"):
        value = f"{author.group('justice')}, Justice"
    else:
        value = f"{author.group('name')}, {' '.join(author.group('title').split())}"
    span = line_of(text, author.start(), author.end())
    where = origin_on_page("opinion's author line", sentences, span[0])
    return Found(f"{value} (author)", value, (span,), where)


def _panel_names(panel: str) -> list[str]:
    """ "Howard, Chief Judge, Selya and Barron, Circuit Judges." -> ["Howard, Chief Judge",
    "Selya, Circuit Judge", "Barron, Circuit Judge"]."""
    panel = " ".join(panel.split()).rstrip(".")
    names: list[str] = []
    cursor = 0
    for title in _JUDGE_TITLE.finditer(panel):
        group = panel[cursor : title.start()].strip(" ,;")
        singular = re.sub(
            r"(?i)judges", "Judge", re.sub(r"(?i)justices", "Justice", title.group(0).strip())
        )
        for name in re.split(r",\s*|\s+and\s+", group):
            name = name.strip(" ,;")
            if re.fullmatch(r"[A-Z][A-Za-z.'’ -]{1,40}", name) and not name.lower().startswith(
                "and"
            ):
                names.append(f"{name}, {singular}")
        cursor = title.end()
    return names
