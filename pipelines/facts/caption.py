"""An opinion's caption read by its layout: the parties on either side of "v." with the roles the
caption gives them, the docket numbers (the case's own and the court below's), and the judges.

A caption is written the same way in every US court: the court's name, "No. 20-1234", the
first side's names in capitals with their role ("Plaintiff, Appellant,"), "v.", the other
side's names and role, then where the case comes from ("Appeal from the United States District
Court ...", "On writ of certiorari to ...", "D.C. No. 1:19-cv-00012"), the panel ("Before
Smith, Chief Judge, Jones and Lee, Circuit Judges.") or the author ("JUSTICE DOE delivered the
opinion of the Court.", "DOE, Justice."). The opening ends where the opinion's body begins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.facts.judges import MAX_OPENING_CHARS, line_of, opening_end, read_judges
from pipelines.facts.structured import Found, clipped, origin_on_page
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.values.dockets import DOCKET, docket_key

MAX_SIDE_LINES = 10
MAX_PARTIES_PER_SIDE = 8
# The singular form of each role a caption gives, and the role across "v." from it.
ROLES = {
    "plaintiff": "defendant",
    "defendant": "plaintiff",
    "appellant": "appellee",
    "appellee": "appellant",
    "petitioner": "respondent",
    "respondent": "petitioner",
    "cross-appellant": "cross-appellee",
    "cross-appellee": "cross-appellant",
    "intervenor": "",
    "movant": "",
    "claimant": "",
}
_ROLE_WORD = re.compile(
    r"(?<![\w-])(cross-appellants?|cross-appellees?|plaintiffs?|defendants?|appellants?|appellees?|"
    r"petitioners?|respondents?|intervenors?|movants?|claimants?)(?![\w])",
    re.IGNORECASE,
)
_VERSUS = re.compile(r"(?<![\w.])v(?:s)?\.(?=\s|$)")
# Lines that end a caption's side: where the case comes from, the panel, dates, headings.
_STOP_LINE = re.compile(
    r"^(?:\[|(?:on\s+)?appeal(?:ed)?\s+from|on\s+(?:writ|petition|discretionary|review|remand)|"
    r"certiorari|petition\s+for|before\b|argued|decided|filed|heard|submitted|syllabus|opinion|"
    r"(?:case|docket|appeal)?\s*nos?\.|in\s+the\b|.*\bcourt\b)",
    re.IGNORECASE,
)
_CAPACITY = re.compile(
    r",?\s+(?:in\s+(?:his|her|their|its)\s+(?:official|individual)\s+capacit(?:y|ies)"
    r"(?:\s+as\s+[^,;]*)?|individually)\s*(?:,|\.|;|$)",
    re.IGNORECASE,
)
_AND = re.compile(r",?\s+and\s+(?=[A-Z])|;\s*")
# A docket number of the court below: a qualifier before "No." or the line that names it.
_LOWER_QUALIFIER = re.compile(
    r"(?:D\.\s?C\.|District\s+Court|Trial\s+Court|Lower\s+Court|Superior\s+Court|Circuit\s+Court|"
    r"Bankruptcy|BAP|Agency|Tax\s+Court|Board|Civil\s+Action|Criminal\s+Action)\s*(?:Case\s+|Docket\s+)?"
    r"(?:Nos?\.)?\s*$",
    re.IGNORECASE,
)
_FROM_BELOW = re.compile(
    r"\b(?:appeal(?:ed)?\s+from|on\s+appeal\s+from|petition\s+for\s+review\s+of|"
    r"review\s+of\s+(?:a|an|the)\s+(?:decision|order|judgment))\b",
    re.IGNORECASE,
)


# An opinion cites its own case's decision below by number alone, without a case name:
# "The District Court granted summary judgment ... See No. CIV-07-0045-HE, 2010 WL 2817220
# (WD Okla., July 16, 2010)". A citation of another case names it ("Smith v. Jones, No. ...").
_LOWER_COURT_CITED = re.compile(
    r"[^()]{0,80}\(\s*(?:[NSEWMC]\.?\s?D\.?|D\.|Bankr\.|Dist\.\s?Ct\.|Super\.\s?Ct\.|"
    r"Tax\s?Ct\.|Ct\.\s?App\.)\s?[A-Z]"
)
_NAMED_CASE = re.compile(r"\bv\.\s|\bIn\s+re\b|\bex\s+rel\.", re.IGNORECASE)
_CITED_AS = re.compile(r"(?:\bSee\b|\bsee\b|\bcf\.|[(;]|^)\s*(?:also\s+)?$")


def _own_history_docket(sentences: DocumentSentences, own: Found | None) -> Found | None:
    """The lower court's number where the opinion cites that court's decision in this case:
    "No." right after "See" (no case name before it), a district or trial court's citation
    form after it, and a lower court named in the sentence or the one before."""
    text = sentences.text
    for match in DOCKET.finditer(text):
        if not _LOWER_COURT_CITED.match(text, match.end()):
            continue
        line = text[max(0, match.start() - 60) : match.start()]
        if not _CITED_AS.search(line) or _NAMED_CASE.search(line):
            continue
        before = text[max(0, match.start() - 300) : match.start()]
        if not re.search(r"\b(?:District|Trial|Superior|Bankruptcy)\s+Court\b", before):
            continue
        number = docket_key(match.group("number"))
        if own is not None and f"No. {number}" == own.normalized:
            continue
        # Quoted with the sentence before it, which names the court: "The District Court
        # granted summary judgment ... See No. ...".
        spans = tuple(sentences.overlapping(match.start(), match.end()))
        index = sentences.spans.index(spans[0]) if spans and spans[0] in sentences.spans else -1
        if index > 0:
            spans = (sentences.spans[index - 1], *spans)
        # As written, less the line break a PDF puts beside a dash ("CIV–07–  0045–HE").
        value = re.sub(r"\s*([-–‑])\s*", r"\1", " ".join(text[match.start() : match.end()].split()))
        value = value.rstrip(".")
        where = origin_on_page("citation of the decision below", sentences, match.start())
        return Found(value, f"No. {number}", spans or ((match.start(), match.end()),), where)
    return None


@dataclass(frozen=True)
class _Side:
    start: int
    end: int
    names: tuple[str, ...]
    role: str


def read_caption(sentences: DocumentSentences) -> dict[str, Found]:
    """case_parties, parties (with roles), docket_number, lower_docket_number and judges, as
    far as the opening gives them."""
    text = sentences.text
    end = opening_end(text)
    found: dict[str, Found] = {}
    captions = _captions(text, end)
    if captions:
        first = captions[0]
        where = origin_on_page("caption", sentences, first[0].start)
        span = clipped(text, first[0].start, first[1].end)
        case = f"{_case_side(first[0])} v. {_case_side(first[1])}"
        found["case_parties"] = Found(case, case, (span,), where)
        later = _captions(text, min(len(text), end + MAX_OPENING_CHARS))
        same_case = [c for c in later if _shares_a_name(c[1], first[1])]
        with_roles = next((c for c in [first, *same_case] if c[0].role or c[1].role), first)
        parties = _with_roles(*with_roles)
        if parties:
            span = clipped(text, with_roles[0].start, with_roles[1].end)
            where = origin_on_page("caption", sentences, with_roles[0].start)
            found["parties"] = Found(parties, parties, (span,), where)
    found.update(_dockets(sentences, end))
    if "lower_docket_number" not in found:
        cited = _own_history_docket(sentences, found.get("docket_number"))
        if cited is not None:
            found["lower_docket_number"] = cited
    judges = read_judges(sentences, end)
    if judges is not None:
        found["judges"] = judges
    return found


def _shares_a_name(side: _Side, other: _Side) -> bool:
    words = {w for name in other.names for w in re.findall(r"[A-Za-z]{3,}", name.casefold())}
    return any(
        w in words for name in side.names for w in re.findall(r"[A-Za-z]{3,}", name.casefold())
    )


def _caption_line(line: str) -> bool:
    """A line of a caption's side: roles alone, or a name in capitals first ("JANE ROE, in
    her official capacity as"), or mostly capitals."""
    letters = [c for c in line if c.isalpha()]
    if not letters:
        return False
    if _role_only(line):
        return True
    first = re.match(r"\W*([A-Za-z][A-Za-z.'’&-]*)", line)
    if first and len(first.group(1).strip(".")) >= 2 and first.group(1).isupper():
        return True
    return sum(c.isupper() for c in letters) >= 0.5 * len(letters)


def _role_only(line: str) -> bool:
    return bool(_ROLE_WORD.search(line)) and not _ROLE_WORD.sub("", line).strip(" ,.;:-")


def _captions(text: str, end: int) -> list[tuple[_Side, _Side]]:
    """Each "v." of the opening whose first side is written in capitals, as captions are."""
    found = []
    for match in _VERSUS.finditer(text, 0, end):
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        line_end = len(text) if line_end < 0 else line_end
        before = _side_lines(text, line_start, match.start(), upwards=True)
        after = _side_lines(text, match.end(), line_end, upwards=False)
        if before is None or after is None:
            continue
        found.append((before, after))
    return found


def _side_lines(text: str, start: int, end: int, *, upwards: bool) -> _Side | None:
    """One side of a caption: the text on the "v." line's side, then whole lines above (or
    below) it while they are caption lines."""
    spans = []
    piece = text[start:end].strip()
    if piece and not _caption_line(piece):
        return None
    if piece:
        offset = start + text[start:end].index(piece)
        spans.append((offset, offset + len(piece)))
    cursor = start if upwards else end
    while len(spans) < MAX_SIDE_LINES:
        if upwards:
            if cursor <= 0:
                break
            line_start = text.rfind("\n", 0, cursor - 1) + 1
            line = text[line_start : cursor - 1] if cursor > 0 else ""
            next_cursor = line_start
        else:
            if cursor >= len(text):
                break
            line_end = text.find("\n", cursor + 1)
            line_end = len(text) if line_end < 0 else line_end
            line = text[cursor + 1 : line_end]
            line_start, next_cursor = cursor + 1, line_end
        stripped = line.strip()
        if stripped:
            if _STOP_LINE.match(stripped):
                break
            if not _caption_line(stripped) and not (
                not upwards and _role_only(_next_line(text, next_cursor))
            ):
                break  # a lowercase line stays only when the side's role follows it
            at = line_start + line.index(stripped)
            spans.append((at, at + len(stripped)))
        cursor = next_cursor
    if not spans:
        return None
    spans.sort()
    body = " ".join(text[s:e] for s, e in spans)
    roles = [m.group(1).lower().rstrip("s") for m in _ROLE_WORD.finditer(body)]
    names_text = _ROLE_WORD.sub(" ", body)
    names = _split_names(names_text)
    if not names or not _caption_line(" ".join(names)):
        return None
    role = "-".join(dict.fromkeys(roles))
    return _Side(spans[0][0], spans[-1][1], tuple(names), role)


def _next_line(text: str, cursor: int) -> str:
    """The first non-blank line after document offset `cursor` (a line end)."""
    for line in text[cursor + 1 : cursor + 400].split("\n"):
        if line.strip():
            return line.strip()
    return ""


def _split_names(text: str) -> list[str]:
    names = []
    for piece in _CAPACITY.split(" ".join(text.split())):
        for name in _AND.split(piece or ""):
            name = re.sub(r"^(?:and|,)\s+", "", name.strip(" ,;:")).strip(" ,;:")
            name = re.sub(r",(?:\s*[.,])+", ",", name).strip(" ,;:")  # a role's commas, removed
            if re.search(r"[A-Za-z]{2}", name) and len(name.split()) <= 20:
                names.append(name)
    return names[:MAX_PARTIES_PER_SIDE]


def _case_side(side: _Side) -> str:
    """A side as a case name says it: its first party (up to an "ex rel."), "et al." for more."""
    first = re.split(r",?\s+ex\s+rel\.", side.names[0], maxsplit=1, flags=re.IGNORECASE)[0]
    if len(side.names) == 2:
        return f"{first}, and {side.names[1]}" if "," in first else f"{first} and {side.names[1]}"
    if len(side.names) > 2 and not re.search(r"\bet\s+al\.?$", first, re.IGNORECASE):
        return f"{first} et al."
    return first


def _with_roles(first: _Side, second: _Side) -> str:
    """ "NAME (role); NAME (role)": a side without a written role takes the one across from the
    other side's ("Plaintiffs, v. X" -> X is the defendant)."""
    role_a = first.role or _across(second.role)
    role_b = second.role or _across(first.role)
    parts = [f"{n} ({role_a})" if role_a else n for n in first.names]
    parts += [f"{n} ({role_b})" if role_b else n for n in second.names]
    return "; ".join(parts)


def _across(role: str) -> str:
    return "-".join(filter(None, (ROLES.get(part, "") for part in _role_parts(role))))


def _role_parts(role: str) -> list[str]:
    parts, rest = [], role
    for known in sorted(ROLES, key=len, reverse=True):
        if known in rest:
            parts.append((rest.index(known), known))
            rest = rest.replace(known, " " * len(known))
    return [name for _, name in sorted(parts)] if parts else []


def _dockets(sentences: DocumentSentences, end: int) -> dict[str, Found]:
    """The case's own docket number (the first "No." of the opening without a lower court's
    qualifier) and the lower court's (a qualified one, or one on a line that says where the
    appeal comes from)."""
    text = sentences.text
    own: Found | None = None
    lower: Found | None = None
    for match in DOCKET.finditer(text, 0, end):
        line_start = text.rfind("\n", 0, match.start()) + 1
        before = text[line_start : match.start() + (len(match.group("label") or ""))]
        previous = text[max(0, text.rfind("\n", 0, max(0, line_start - 1)) + 1) : match.start()]
        number = docket_key(match.group("number"))
        normalized = f"No. {number}"
        span = line_of(text, match.start(), match.end())
        is_lower = bool(_LOWER_QUALIFIER.search(before + "No.")) and before.strip() != ""
        is_lower = is_lower or bool(_FROM_BELOW.search(previous))
        value = " ".join(text[match.start() : match.end()].split()).rstrip(".")
        if is_lower and lower is None:
            where = origin_on_page("caption (court below)", sentences, span[0])
            lower = Found(value, normalized, (span,), where)
        elif not is_lower and own is None:
            own = Found(value, normalized, (span,), origin_on_page("caption", sentences, span[0]))
    found = {}
    if own is not None:
        found["docket_number"] = own
    if lower is not None and (own is None or lower.normalized != own.normalized):
        found["lower_docket_number"] = lower
    return found
