"""A contract's term, renewal and parties' roles read by its structure, and the clause number
any quoted sentence stands under.

The term is set by a sentence whose subject is the agreement or its term ("The term of this
Agreement shall commence ... and expire on ...", "This Agreement shall remain in effect for
five (5) years"), best in a clause headed "Term"; a sentence about how long something else
lasts (confidentiality surviving termination, a warranty, a notice) does not set it. Renewal
is a sentence that renews or extends the agreement for successive or additional periods.
A party's role is the defined term its preamble gives it ('Acme Corp. ("Licensor")'), unless
that term is only a short form of its name ('("Acme")').
"""

from __future__ import annotations

import re

from pipelines.facts.structured import Found, clipped
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.values.dates import find_dates
from pipelines.values.durations import find_durations

# How far back a clause number is looked for before a sentence.
CLAUSE_REACH_CHARS = 4_000
_CLAUSE_NUMBER = re.compile(
    r"(?m)^\s*(?:(?P<word>Section|SECTION|Article|ARTICLE|Clause|CLAUSE)\s+)?"
    r"(?P<number>\d{1,2}(?:\.\d{1,2}){0,3}|[IVXL]{1,6}\b)[.)]?\s+(?P<title>[A-Z(][^\n]{0,80})"
)
_SUBJECT = re.compile(
    r"\b(?:the\s+)?(?:initial\s+)?term\s+of\s+this\s+(?:agreement|lease|license|contract)\b|"
    r"\bthis\s+(?:agreement|lease|license|contract)\b|\bthe\s+(?:initial\s+)?term\b",
    re.IGNORECASE,
)
_TERM_VERB = re.compile(
    r"\b(?:shall|will|is|be|to)\s+(?:\w+\s+){0,4}?(?:commenc\w*|continu\w*|remain\w*|expir\w*|"
    r"end\b|ending|terminat\w*|run\b|last\b)|\bexpir\w*|\bin\s+(?:full\s+)?force\s+and\s+effect|"
    r"\b(?:commences|continues|remains|ends|terminates|runs)\b",
    re.IGNORECASE,
)
# "for a period of seven (7) years after its termination": how long a duty survives the term.
AFTER_THE_TERM = re.compile(
    r"\W*(?:after|following|beyond|from)\s+(?:its|the|such|any|this\s+agreement['’]s)?\s*"
    r"(?:termination|expiration|expiry|end)\b",
    re.IGNORECASE,
)
# Sentences about how long something other than the agreement lasts.
_OTHER_SUBJECT = re.compile(
    r"\b(?:surviv\w*|confidential\w*|non-?compet\w*|non-?solicit\w*|warrant\w*|indemnif\w*|"
    r"(?:after|following|upon|prior\s+to|before)\s+(?:the\s+)?(?:termination|expiration|expiry)|"
    r"notice)\b|[”\"]\s*(?:means|shall\s+mean|has\s+the\s+meaning)\b",
    re.IGNORECASE,
)
_END_CUE = re.compile(r"\b(?:expir\w*|until|through|ending\s+on|end\s+on|terminat\w*\s+on)\b", re.I)
_PERIOD_CUE = re.compile(r"\b(?:for|of|period|term|duration|until)\b", re.IGNORECASE)
_PERPETUAL = re.compile(r"\b(?:perpetu\w*|indefinite(?:ly)?)\b", re.IGNORECASE)
# An end that is an event, not a date: "expire on the last day of the Royalty Term", "for so
# long as the parties remain shareholders", "until terminated", "terminate on the earlier of".
_EVENT_END = re.compile(
    r"\b(?:expire\s+(?:on|upon|at|with)\s+|for\s+so\s+long\s+as\s+|until\s+|terminate\s+on\s+"
    r"the\s+(?=earlier|later|date|last|first))[^.;]{3,160}",
    re.IGNORECASE,
)
_TERM_HEADING = re.compile(r"\b(?:term|duration)\b", re.IGNORECASE)
_RENEWAL = re.compile(
    r"\bautomatic\w*\s+(?:be\s+)?(?:renew|extend)\w*|\b(?:renew|extend)\w*\s+(?:\w+\s+){0,3}?for\s+"
    r"(?:an?\s+)?(?:successive|additional|further|subsequent|consecutive)|\b(?:successive|"
    r"additional|further|consecutive)\s+(?:\w+\s+){0,3}?(?:renewal\s+)?(?:terms?|periods?)\b|"
    r"\brenewal\s+terms?\b",
    re.IGNORECASE,
)
_NOTICE_BEFORE = re.compile(
    r"\b(?:notice|prior|before|advance|written|within|after)\W+(?:\w+\W+){0,3}$", re.IGNORECASE
)
_DEFINED_TERM = re.compile(
    r"^[^\n]{0,160}?(?:\(\s*(?:[^()“”\"]{0,60}?)?|hereinafter\s+(?:referred\s+to\s+as\s+|called\s+)?"
    r"(?:the\s+)?)[“\"]([^”\"]{1,40})[”\"]",
    re.IGNORECASE,
)
_AS_ROLE = re.compile(r"^,?\s+as\s+(?:the\s+)?([A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+)?)\b")
_GENERIC_TERMS = frozenset(
    ["party", "parties", "agreement", "affiliate", "affiliates", "effective date", "each"]
)


def clause_label(text: str, offset: int) -> str | None:
    """The number of the clause that document offset `offset` stands in ("clause 12.1",
    "Section 4", "Article IV"), from the nearest numbered heading before it."""
    window_start = max(0, offset - CLAUSE_REACH_CHARS)
    found = None
    for match in _CLAUSE_NUMBER.finditer(text, window_start, offset + 1):
        if match.start("number") <= offset:
            found = match
    if found is None:
        return None
    word = (found.group("word") or "clause").capitalize()
    word = "clause" if word == "Clause" else word
    return f"{word} {found.group('number')}"


def _in_term_clause(text: str, offset: int) -> bool:
    window_start = max(0, offset - CLAUSE_REACH_CHARS)
    heading = None
    for match in _CLAUSE_NUMBER.finditer(text, window_start, offset + 1):
        heading = match
    if heading is None:
        return False
    title = re.split(r"[.:]", heading.group("title"), maxsplit=1)[0]
    return bool(_TERM_HEADING.search(title)) and len(title.split()) <= 6


def read_term(sentences: DocumentSentences) -> Found | None:
    """The agreement's own term: an end date, a period, or no end ("perpetual")."""
    text = sentences.text
    best: tuple[int, int, Found] | None = None
    for start, end in sentences.spans:
        sentence = text[start:end]
        subject = _SUBJECT.search(sentence)
        if subject is None or _OTHER_SUBJECT.search(sentence):
            continue
        verb = _TERM_VERB.search(sentence, subject.end(), subject.end() + 200)
        if verb is None:
            continue
        renewal = _RENEWAL.search(sentence)
        value = _term_value(
            sentence, subject.start(), renewal.start() if renewal else len(sentence)
        )
        if value is None:
            continue
        score = 3 * _in_term_clause(text, start)
        score += 2 * bool(re.search(r"term\s+of\s+this|initial\s+term", subject.group(0), re.I))
        score += bool(_END_CUE.search(sentence))
        span = clipped(text, start, end)
        found = Found(value[0], value[1], (span,), clause_origin(sentences, span[0]))
        if best is None or score > best[0]:
            best = (score, start, found)
    return best[2] if best else None


def _term_value(sentence: str, start: int, end: int) -> tuple[str, str] | None:
    """(value, normalized) of the term that `sentence` sets between `start` and `end`."""
    for mention in find_dates(sentence):
        if start <= mention.start < end and _END_CUE.search(
            sentence[max(0, mention.start - 60) : mention.start]
        ):
            return sentence[mention.start : mention.end], mention.iso
    for mention in find_durations(sentence):
        before = sentence[max(0, mention.start - 40) : mention.start]
        if (
            start <= mention.start < end
            and _PERIOD_CUE.search(before)
            and not _NOTICE_BEFORE.search(before)
            and not AFTER_THE_TERM.match(sentence, mention.end)
        ):
            return " ".join(sentence[mention.start : mention.end].split()), mention.iso
    perpetual = _PERPETUAL.search(sentence, start, end)
    if perpetual:
        return perpetual.group(0), "perpetual"
    event = _EVENT_END.search(sentence, start, end)
    if event:
        phrase = " ".join(event.group(0).split()).rstrip(" ,")
        # Not its defined term, nor the exceptions after it.
        phrase = re.split(r"\s+\((?:the\s+)?[“\"]|,?\s+(?:unless|provided|subject\s+to)\b", phrase)[
            0
        ]
        return phrase, phrase.casefold()
    return None


def read_renewal(sentences: DocumentSentences) -> Found | None:
    """The period the agreement renews for, from the first sentence that renews it."""
    text = sentences.text
    for start, end in sentences.spans:
        sentence = text[start:end]
        renewal = _RENEWAL.search(sentence)
        if renewal is None or not re.search(
            r"\b(?:agreement|term|lease|license)\b", sentence, re.I
        ):
            continue
        for mention in find_durations(sentence):
            before = sentence[max(0, mention.start - 40) : mention.start]
            if mention.start < renewal.start() - 200 or _NOTICE_BEFORE.search(before):
                continue
            span = clipped(text, start, end)
            value = " ".join(sentence[mention.start : mention.end].split())
            return Found(value, mention.iso, (span,), clause_origin(sentences, span[0]))
    return None


def clause_origin(sentences: DocumentSentences, offset: int) -> str:
    """ "clause 12.1, p. 9", or "p. 9" where no clause number stands before the offset."""
    label = clause_label(sentences.text, offset)
    page = f"p. {sentences.page_of(offset)}"
    return f"{label}, {page}" if label else page


def party_roles(text: str, names: list[str], *, within: int = 6_000) -> dict[str, str]:
    """Each party's role as the opening defines it ('Acme Corp. ("Licensor")' -> Licensor;
    ', as Servicer' -> Servicer); a name whose defined term is its own short form has none."""
    roles: dict[str, str] = {}
    opening = text[:within]
    for name in names:
        pattern = r"\s+".join(re.escape(word) for word in name.split())
        match = re.search(pattern, opening, re.IGNORECASE)
        if match is None:
            continue
        after = opening[match.end() : match.end() + 250]
        # Stop at the next party's name: its defined term is not this one's.
        for other in names:
            if other != name:
                at = after.find(other.split()[0])
                after = after[:at] if at > 0 else after
        term = _DEFINED_TERM.match(after) or _AS_ROLE.match(after)
        if term is None:
            continue
        role = " ".join(term.group(1).split()).strip(" ,")
        if role.casefold() in _GENERIC_TERMS or _short_form(role, name):
            continue
        roles[name] = role
    return roles


def _short_form(term: str, name: str) -> bool:
    """Whether `term` abbreviates `name`: one of its words, or its letters in order starting
    with the name's first ("HOFV" for "HOF Village, LLC")."""
    words = {w.casefold() for w in re.findall(r"[A-Za-z]+", name)}
    term_words = [w.casefold() for w in re.findall(r"[A-Za-z]+", term)]
    if term_words and all(w in words for w in term_words):
        return True
    letters = "".join(term_words)
    name_letters = "".join(re.findall(r"[a-z]", name.casefold()))
    acronym = term.isupper() and " " not in term.strip()
    if not letters or not name_letters or (letters[0] != name_letters[0] and not acronym):
        return False
    position = 0
    for letter in letters:
        position = name_letters.find(letter, position)
        if position < 0:
            return False
        position += 1
    return True
