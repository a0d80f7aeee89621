"""Readers of names: a document's title, an opinion's court, parties and docket number. A
name the model gives counts only where the document writes it; the rules read the layout
every title page and caption shares (a title line in capitals, a caption "A, Plaintiff, v. B,
Defendant", "No. 12-345"). A contract's parties: facts_values_parties.py."""

from __future__ import annotations

import re

from pipelines.facts.context import FieldContext
from pipelines.facts.reading import Reading, cleaned_answer, find_phrase
from pipelines.facts.values_parties import MAX_NAME_WORDS, capitalised, names_reading
from pipelines.retrieval.evidence import Evidence
from pipelines.values.dockets import DOCKET, docket_key

MAX_TITLE_WORDS = 12
# Words that name the kind of a legal document: a title holds one.
_GENRE = re.compile(
    r"\b(?:agreements?|contracts?|leases?|licen[cs]es?|amendments?|addend(?:um|a)|deeds?|"
    r"indentures?|memorand(?:um|a)|plans?|notes?|terms|charters?|by-?laws|policy|guarantee|"
    r"guaranty|warrants?|statement\s+of\s+work|orders?|protocol|understanding)\b",
    re.IGNORECASE,
)
# Words that say what a party is, not who: "the Parties", "Licensor" alone name no one.
_ROLE_WORDS = re.compile(
    r"^(?:plaintiffs?|defendants?|appellants?|appellees?|petitioners?|respondents?|"
    r"intervenors?|cross-appellants?|cross-appellees?|and|et\s+al\.?)$",
    re.IGNORECASE,
)
_VERSUS = re.compile(r"(?<![\w.])v(?:s)?\.(?=\s|$)")
_CAPACITY = re.compile(r",\s*(?:in\s+(?:his|her|their|its)\s+official|individually|et\s+al)", re.I)
_COURT_WORD = re.compile(r"\bcourt\b", re.IGNORECASE)
_COURT_LEAD = re.compile(r"^\s*in\s+the\s+", re.IGNORECASE)
_COURT_CONTINUATION = re.compile(r"^\s*(?:for|of)\s+the\b", re.IGNORECASE)


def _lines(sentence: Evidence) -> list[tuple[int, str]]:
    """(document offset, text) of each line of the sentence."""
    lines, offset = [], sentence.start_char
    for line in sentence.text.split("\n"):
        lines.append((offset, line))
        offset += len(line) + 1
    return lines


# ---- titles -------------------------------------------------------------------------------


def _is_title(line: str) -> bool:
    words = line.split()
    return (
        0 < len(words) <= MAX_TITLE_WORDS
        and _GENRE.search(line) is not None
        and capitalised(line)
        and not line.rstrip().endswith((",", ";"))
    )


def read_title_model(context: FieldContext, answer: str) -> Reading | None:
    text = cleaned_answer(answer)
    if not _is_title(text):
        return None
    found = find_phrase(text, (*context.quotes, *context.sentences))
    if found is None:
        return None
    _, start, end = found
    value = context.document.text[start:end]
    return Reading(value, " ".join(value.split()), start, end)


def read_title_rule(context: FieldContext) -> Reading | None:
    """The first short capitalised line of the opening that names a kind of document."""
    for sentence in context.sentences:
        for offset, line in _lines(sentence):
            stripped = line.strip()
            if _is_title(stripped):
                start = offset + line.index(stripped)
                return Reading(stripped, " ".join(stripped.split()), start, start + len(stripped))
    return None


# ---- an opinion's caption ------------------------------------------------------------------


def _caption_side(text: str) -> str:
    side = _CAPACITY.split(text, maxsplit=1)[0]
    return " ".join(side.split()).strip(" ,;:")


def read_case_parties_model(context: FieldContext, answer: str) -> Reading | None:
    text = cleaned_answer(answer)
    sides = _VERSUS.split(text, maxsplit=1) if _VERSUS.search(text) else text.split(";")
    names = [_caption_side(side) for side in sides if side.strip()]
    reading = names_reading(context, names[:2])
    if reading is None:
        return None
    first, second = reading.value.split("; ", 1)
    value = f"{first} v. {second}"
    return Reading(value, value, reading.start, reading.end)


def _caption_around(text: str, at: int, versus_end: int) -> tuple[int, str, int, str] | None:
    """The two sides of a caption around a "v." at `at`: (start, first side, start, second side)
    in document offsets. The first side is the text before "v." on its line, else the nearest
    line above that is not a role ("Plaintiff, Appellant,"); the second, the line after."""
    line_start = text.rfind("\n", 0, at) + 1
    first_start, first = line_start, text[line_start:at].strip()
    if not first or _ROLE_WORDS.match(first.strip(" ,")):
        first = ""
        cursor = line_start - 1
        while cursor > 0 and at - cursor < 600 and not first:
            above_start = text.rfind("\n", 0, cursor) + 1
            line = text[above_start:cursor]
            words = [w.strip(" ,.") for w in re.split(r"[,\s]+", line) if w.strip(" ,.")]
            if words and not all(_ROLE_WORDS.match(w) for w in words):
                first_start, first = above_start + len(line) - len(line.lstrip()), line.strip()
            cursor = above_start - 1
    rest = text[versus_end : versus_end + 600]
    second_start = versus_end + len(rest) - len(rest.lstrip())
    second = rest.lstrip().split("\n", 1)[0]
    first, second = _caption_side(first), _caption_side(second)
    if not first or not second:
        return None
    return first_start, first, second_start, second


def read_case_parties_rule(context: FieldContext) -> Reading | None:
    """The opening's caption: around its first "v." whose first side is written in capitals, as
    captions are (a "See A v. B, 200 U.S. 321" citation is not), else around its first "v."."""
    text = context.document.text
    captions = []
    for sentence in context.sentences:
        for match in _VERSUS.finditer(sentence.text):
            at = sentence.start_char + match.start()
            found = _caption_around(text, at, at + len(match.group(0)))
            if found is not None:
                captions.append(found)
    if not captions:
        return None
    upper = [c for c in captions if c[1].upper() == c[1]]
    first_start, first, second_start, second = (upper or captions)[0]
    value = f"{first} v. {second}"
    return Reading(value, value, first_start, second_start + len(second))


def read_court_model(context: FieldContext, answer: str) -> Reading | None:
    text = _COURT_LEAD.sub("", cleaned_answer(answer))
    if not _COURT_WORD.search(text) or len(text.split()) > MAX_NAME_WORDS:
        return None
    found = find_phrase(text, (*context.quotes, *context.sentences))
    if found is None:
        return None
    _, start, end = found
    value = " ".join(context.document.text[start:end].split())
    return Reading(value, value, start, end)


def read_court_rule(context: FieldContext) -> Reading | None:
    """The opening's first short capitalised line naming a court, with a following "For the
    First Circuit" line."""
    for sentence in context.sentences:
        lines = _lines(sentence)
        for index, (offset, line) in enumerate(lines):
            stripped = line.strip()
            if not (
                _COURT_WORD.search(stripped)
                and len(stripped.split()) <= MAX_TITLE_WORDS
                and capitalised(stripped)
            ):
                continue
            start = offset + line.index(stripped)
            end = start + len(stripped)
            if index + 1 < len(lines) and _COURT_CONTINUATION.match(lines[index + 1][1]):
                following = lines[index + 1]
                end = following[0] + len(following[1].rstrip())
            lead = _COURT_LEAD.match(context.document.text[start:end])
            if lead:
                start += lead.end()
            value = " ".join(context.document.text[start:end].split())
            return Reading(value, value, start, end)
    return None


def _dockets(sentences: list[Evidence]) -> list[Reading]:
    found = []
    for sentence in sentences:
        for match in DOCKET.finditer(sentence.text):
            start, end = sentence.start_char + match.start(), sentence.start_char + match.end()
            number = docket_key(match.group("number"))
            found.append(Reading(" ".join(match.group(0).split()), f"No. {number}", start, end))
    return found


def read_docket_model(context: FieldContext, answer: str) -> Reading | None:
    text = cleaned_answer(answer)
    match = DOCKET.search(text) or re.search(r"\d[\w]*(?:\s?[-–‑:]\s?\w+)+", text)
    if match is None:
        return None
    number = match.groupdict().get("number") or match.group(0)
    wanted = "No. " + docket_key(number)
    found = _dockets([*context.quotes, *context.sentences])
    return next((reading for reading in found if reading.normalized == wanted), None)


def read_docket_rule(context: FieldContext) -> Reading | None:
    found = _dockets(list(context.sentences))
    return found[0] if found else None
