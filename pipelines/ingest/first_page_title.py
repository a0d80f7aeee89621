"""A legal document's title from its first page, for a PDF whose metadata names none: an
opinion's caption ("ACME CORP. v. BETA INC.", on one line or as party, "v.", party) or a
contract's title line ("MASTER SERVICES AGREEMENT"). None when the page shows neither.
"""

from __future__ import annotations

import re

# Only the opening lines of the page: a title sits above the text.
MAX_LINES = 40
MAX_TITLE_CHARS = 150
MAX_TITLE_WORDS = 12
# Words that name the kind of a legal document: a contract's title line holds one.
_GENRE = re.compile(
    r"\b(?:agreements?|contracts?|leases?|licen[cs]es?|amendments?|addend(?:um|a)|deeds?|"
    r"indentures?|memorand(?:um|a)|charters?|by-?laws|guarant(?:ee|y)|statement\s+of\s+work|"
    r"terms\s+and\s+conditions|purchase\s+order)\b",
    re.IGNORECASE,
)
_VERSUS = re.compile(r"(?<![\w.])(?:v|vs|V|VS)\.(?=\s|$)|\s(?:versus|VERSUS)\s")
_VERSUS_LINE = re.compile(r"^(?:v|vs|versus)\.?$", re.IGNORECASE)
# A party's role after its name in a caption: "ACME CORP., Plaintiff-Appellant,".
_ROLE = re.compile(
    r",?\s*\b(?:plaintiffs?|defendants?|appellants?|appellees?|petitioners?|respondents?|"
    r"intervenors?)(?:[-–\s]+(?:appellants?|appellees?|petitioners?|respondents?))?\b.*$",
    re.IGNORECASE,
)
_SMALL_WORDS = "a an and at by for in of on or the to with de la"
_SMALL = frozenset(_SMALL_WORDS.split())


def first_page_title(page_text: str) -> str | None:
    """The caption or the title line of a legal document's first page (see the module)."""
    lines = [" ".join(line.split()) for line in page_text.splitlines()]
    lines = [line for line in lines if line][:MAX_LINES]
    return _caption(lines) or _contract_title(lines)


def _caption(lines: list[str]) -> str | None:
    for index, line in enumerate(lines):
        if _VERSUS_LINE.match(line) and 0 < index < len(lines) - 1:
            first = _party(lines[:index])
            second = _party(lines[index + 1 :], after=True)
            if first and second:
                return _fit(f"{first} v. {second}")
        elif _VERSUS.search(line):
            first, second = (_party([side]) for side in _VERSUS.split(line, maxsplit=1))
            # A caption names parties, not a citation's volume and page ("Smith v. Jones, 5 F.4th").
            is_citation = any(c.isdigit() for c in line)
            if first and second and not is_citation and _is_capitalised(first + " " + second):
                return _fit(f"{first} v. {second}")
    return None


def _party(lines: list[str], *, after: bool = False) -> str | None:
    """The party's name next to a "v." line: the nearest line that is not only a role."""
    ordered = lines if after else list(reversed(lines))
    for line in ordered[:3]:
        name = _ROLE.sub("", line).strip(" ,;:")
        if name:
            return name if _is_capitalised(name) else None
    return None


def _contract_title(lines: list[str]) -> str | None:
    for line in lines:
        words = line.split()
        if (
            len(words) <= MAX_TITLE_WORDS
            and _GENRE.search(line)
            and _is_capitalised(line)
            and not line.endswith((",", ";", ":"))
        ):
            return _fit(line)
    return None


def _is_capitalised(text: str) -> bool:
    words = [w for w in re.findall(r"[A-Za-z][\w'’&.-]*", text) if w.lower() not in _SMALL]
    return bool(words) and sum(w[0].isupper() for w in words) >= 0.8 * len(words)


def _fit(title: str) -> str | None:
    title = title.strip(" ,;:")
    return title if 0 < len(title) <= MAX_TITLE_CHARS else None
