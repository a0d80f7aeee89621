"""Whether a quote states a value in the role a question asks about: the words around the value
that say what it is (pipelines.answer.roles reads them for each part of a question).

- jurisdiction: governing-law wording ("governed by", "construed") with the place after "the
  laws of", or the only place the sentence names;
- party: the name in a preamble or caption: after "between", near "v.", or followed by a
  defined-term parenthesis or "a Delaware corporation";
- court: the name as the opening writes it (pages 1-2, or in capitals, or "In the ...");
- date: the nearest date words say it is the date asked about (made, effective, decided), of
  this document and not another one it names; expiry: term or end wording near it;
- period, amount: the sentence shares the question's own nouns; dose: dosing words;
- docket, renewal: the value is its own role ("No. 12-345", "shall renew");
- outcome: a sentence that orders it ("we affirm", "the judgment is reversed");
- warning, contraindication, indication: the section's own words.
"""

from __future__ import annotations

import re

from pipelines.answer import asked as k
from pipelines.answer.kind_values import Value, values_of
from pipelines.answer.quote_context import Quoted
from pipelines.answer.specifics import covers, specifics
from pipelines.facts.contract_terms import AFTER_THE_TERM
from pipelines.retrieval.bm25 import terms

# The opening of an opinion, where its court is named.
OPENING_PAGES = 2
# How far before or after a name the words that make it a party are looked for.
PARTY_REACH_CHARS = 200

_GOVERNING = re.compile(r"\bgovern\w*|\bconstrued\b|\binterpreted\b|\benforced\b", re.I)
_LAW_OF = re.compile(
    r"\blaws?\s+(?:in\s+force\s+in\s+|of\s+)(?:the\s+)?(?:(?:state|commonwealth|province|"
    r"republic|kingdom)\s+of\s+)?(?:the\s+)?",
    re.IGNORECASE,
)
LAW_OF_REACH_CHARS = 40
_PARTY_BEFORE = re.compile(r"\b(?:between|among)\b", re.IGNORECASE)
_CASE_CITATION = re.compile(r"\b\d+\s+(?:[A-Z][\w.]*\s*){1,4}\d+\b|\bSee\b")
_VERSUS = re.compile(r"(?<![\w.])vs?\.(?=\s|$)")
# After a party's name: its company form, then a defined-term parenthesis ("(“Acme”)"), what
# it is ("a Delaware corporation"), or its role in a caption ("Plaintiff, Appellant").
_PARTY_AFTER = re.compile(
    r"^[\s,]*(?:(?:Inc|LLC|L\.L\.C|Ltd|Corp|Co|LP|L\.P|LLP|PLC|AG|GmbH|S\.A|N\.A)\b\.?[\s,]*)*"
    r"(?:[^.;]{0,80}?\(\s*(?:the\s+|each\s+a\s+|collectively\s+|hereinafter\s+)?[“\"']"
    r"|(?:a|an)\s+[\w\s,.-]{0,60}?\b(?:corporation|company|partnership|association|limited|"
    r"trust|bank|university|entity|organi[sz]ation|agency|fund|society)\b"
    r"|(?:plaintiffs?|defendants?|appellants?|appellees?|petitioners?|respondents?)\b)",
    re.IGNORECASE,
)

# What a date is the date of, read from the words nearest before it (else right after it):
# "made and entered into as of the 19th day of December" is the date it was made; "shall
# commence as of the date hereof and shall expire on December 31" is when it ends.
_DATE_CUE = re.compile(
    r"\b(?P<made>made|entered|dated|signed|executed|as\s+of|day\s+of|date[d:]?)\b"
    r"|\b(?P<argued>argued|submitted)\b"
    r"|\b(?P<decided>decided|filed|issued)\b"
    r"|\b(?P<effective>effective|commenc\w*|start\w*|begin\w*)\b"
    r"|\b(?P<end>expir\w*|terminat\w*|until|through|end\w*|renew\w*)\b",
    re.IGNORECASE,
)
_DATE_ASKED = (
    ("argued", re.compile(r"\b(?:argued|submitted|heard)\b", re.I)),
    ("decided", re.compile(r"\b(?:decided|issued|filed)\b", re.I)),
    ("effective", re.compile(r"\b(?:effective|start|starts|begin|begins|commence\w*)\b", re.I)),
    ("made", re.compile(r"\b(?:made|entered|dated|signed|executed|agreement\s+date)\b", re.I)),
)
# The classes of cue that say a date is the one asked about, by what is asked.
_DATE_ACCEPTS = {
    "made": {"made"},
    "effective": {"effective", "made"},
    "decided": {"decided", "made"},
    "argued": {"argued"},
}
DATE_CUE_BEFORE_CHARS, DATE_CUE_AFTER_CHARS = 80, 40
_DOCUMENT_NOUN = re.compile(
    r"(?P<this>\b(?:this|the|such|said)\s+[“\"']?|[“\"'])?\b(?:agreement|contract|lease|amendment)\b",
    re.IGNORECASE,
)
_ROLE_WORDS = {
    k.EXPIRY: r"\bterms?\b|\bexpir\w*|\bterminat\w*|\buntil\b|\bend\w*\b|\bcontinu\w*|\bperiod\b"
              r"|\bthrough\b|\bin\s+(?:full\s+)?(?:force|effect)\b",
    k.DOSE: r"\bdos\w*|\badminister\w*|\bdaily\b|\bonce\b|\btwice\b|\bevery\b|\btimes\b|\btake\w*"
            r"|\brecommended\b|\binitial\b|\bmaximum\b|\bper\s+day\b|\bhours?\b",
    k.OUTCOME: r"\bwe\b|\bthis\s+court\b|\bthe\s+court\b|\bjudgment\b|\border\w*\b|\bdecision\b"
               r"|\bhereby\b|\baccordingly\b|\btherefore\b|\bthus\b|\bappeal\b|\bpetition\b",
    k.RELIEF: r"\bseek\w*|\bsought\b|\brequest\w*|\bask\w*|\bmov(?:e|ed|es|ing)\s+(?:for|to)\b"
              r"|\bpray\w*|\bmotion\b|\bfiled\s+(?:suit|a\s+complaint|an?\s+action)\b|\bsu(?:ed|ing)\b"
              r"|\bpetition\w*|\bcomplaint\b",
    k.WARNING: r"\bwarn\w*|\bcaution\w*|\bprecaution\w*|\brisks?\b|\bmay\s+cause\b|\badverse\b"
               r"|\bside\s+effects?\b|\bserious\b|\bfatal\b|\bmonitor\w*",
    # The box's own heading, in capitals ("WARNING: LACTIC ACIDOSIS"), or the box named, not a
    # cross-reference to it ("[see Boxed Warning]") nor a warning of another section.
    k.BOXED: r"(?-i:\bWARNING\s*:|\bBOXED\s+WARNING\b)|(?<!see\s)\bboxed\s+warning\b",
    k.CONTRAINDICATION: r"\bcontraindicat\w*|\bshould\s+not\s+be\s+(?:used|given|taken|"
                        r"administered)\b|\bdo\s+not\s+(?:use|give|take|administer)\b|\bmust\s+not\b",
    k.INDICATION: r"\bindicated\b|\bindications?\b|\btreatment\s+of\b|\bused\s+(?:to\s+treat|for)\b"
                  r"|^\W*uses\b"
                  r"|\bfor\s+the\s+(?:treatment|management|prevention)\b",
}  # fmt: skip
ROLE = {kind: re.compile(pattern, re.IGNORECASE) for kind, pattern in _ROLE_WORDS.items()}
# Question words that name no particular thing: left out of the nouns a quote must share.
_GENERIC_QUESTION_STEMS = frozenset(
    terms(
        "agreement contract document lease license long many much period time day days week "
        "weeks month months year years amount number total state says say given give"
    )
)


def role_of(kind: str, clause: str, quote: Quoted, value: Value) -> bool:
    """Whether `quote` states `value` (a value of the quote's text) in the role `kind` asks."""
    text = quote.text
    if kind == k.JURISDICTION:
        if not _GOVERNING.search(text):
            return False
        introduced = any(
            0 <= value.start - m.end() <= LAW_OF_REACH_CHARS for m in _LAW_OF.finditer(text)
        )
        places = {v.text.lower() for v in values_of(k.JURISDICTION, text)}
        return introduced or len(places) == 1
    if kind == k.PARTY:
        before = text[max(0, value.start - PARTY_REACH_CHARS) : value.start]
        after = text[value.end : value.end + PARTY_REACH_CHARS]
        near = text[max(0, value.start - PARTY_REACH_CHARS) : value.end + PARTY_REACH_CHARS]
        # "See A v. B, 200 U.S. 321" cites another case: its "v." names no party of this one.
        versus = _VERSUS.search(near) is not None and _CASE_CITATION.search(near) is None
        return bool(_PARTY_BEFORE.search(before) or _PARTY_AFTER.search(after) or versus)
    if kind == k.COURT:
        written = text[value.start : value.end]
        lead = text[max(0, value.start - 8) : value.start].lower()
        return quote.page <= OPENING_PAGES or written.isupper() or "in the" in lead
    if kind == k.DATE:
        asked = date_asked(clause)
        if asked is None:
            return _shares_question_noun(clause, text)
        return _date_cue(text, value) in _DATE_ACCEPTS[asked] and not _of_another_document(
            text, value
        )
    if kind == k.EXPIRY:
        near = text[max(0, value.start - DATE_CUE_BEFORE_CHARS) : value.end + DATE_CUE_AFTER_CHARS]
        if value.kind == k.PERIOD and _notice_or_cure_period(text, value):
            return False  # "cure within 15 days after notice" is no term of the agreement
        return ROLE[k.EXPIRY].search(near) is not None
    if kind in (k.PERIOD, k.AMOUNT):
        return _shares_question_noun(clause, text)
    if kind == k.DOCKET:
        return _docket_of_court_asked(clause, text)
    if kind == k.RENEWAL:
        # "shall renew for successive one-year terms", not "trademark renewal decisions".
        near = text[max(0, value.start - RENEWAL_REACH_CHARS) : value.end + RENEWAL_REACH_CHARS]
        return _RENEWAL_OF_TERM.search(near) is not None
    if kind == k.OUTCOME:
        return bool(ROLE[k.OUTCOME].search(text)) or text.strip().isupper()
    if kind == k.RELIEF:
        # "Tarrant filed suit ..., seeking to enjoin": the asking words before the relief, in
        # its sentence, and the party the question names there too.
        before = text[_sentence_start(text, value, RELIEF_REACH_CHARS) : value.start]
        named = _named_in(clause)
        near = text[max(0, value.start - RELIEF_REACH_CHARS) : value.end]
        return ROLE[kind].search(before) is not None and all(
            re.search(rf"\b{re.escape(name)}", near, re.IGNORECASE) for name in named
        )
    if kind == k.DOSE:
        # The dose for what the question names (a population, an infection, a kidney function),
        # not any dose: "the usual adult dose for an ear infection" is not the children's.
        # Read in the dose's own sentence (a flattened table's row), not the whole quote: the
        # highlights name renal dosing two sentences after the children's dose.
        asked = specifics(clause, also_generic=("dose doses dosage dosing",))
        return (
            bool(ROLE[kind].search(text))
            and covers(asked, _own_sentence(text, value))
            and not _graded_otherwise(clause, text, value)
        )
    return bool(ROLE[kind].search(text))


# How far around a dose its own sentence is read (a table row has no sentence end).
DOSE_SCOPE_BEFORE_CHARS, DOSE_SCOPE_AFTER_CHARS = 240, 80


def _sentence_start(text: str, value: Value, reach: int) -> int:
    """Where the sentence holding `value` starts, at most `reach` characters before it (a
    flattened table row has no sentence end)."""
    start = max(0, value.start - reach)
    ends = list(_SENTENCE_END.finditer(text, start, value.start))
    return ends[-1].end() if ends else start


def _own_sentence(text: str, value: Value) -> str:
    """The sentence of `text` that `value` is in, at most the reach above around it."""
    start = _sentence_start(text, value, DOSE_SCOPE_BEFORE_CHARS)
    end = min(len(text), value.end + DOSE_SCOPE_AFTER_CHARS)
    after = _SENTENCE_END.search(text, value.end, end)
    return text[start : after.start() + 1 if after else end]


# How far before a relief the words that ask for it are looked for.
RELIEF_REACH_CHARS = 160
# Capitalised words a question may start with or use without naming anyone.
_NOT_NAMES = frozenset(
    [
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "did",
        "does",
        "do",
        "is",
        "are",
        "was",
        "were",
        "the",
        "a",
        "an",
        "court",
        "federal",
        "state",
        "district",
        "supreme",
        "appeals",
        "circuit",
        "plaintiff",
        "plaintiffs",
        "defendant",
        "defendants",
        "i",
    ]
)


def _named_in(clause: str) -> list[str]:
    """The names a question uses for a party: its capitalised words after the first, less
    question words and courts' words ("What did Tarrant ask the federal district court")."""
    words = re.findall(r"\b[A-Z][\w'’-]+", clause)[1:] if clause[:1].isupper() else []
    return [w for w in words if w.lower() not in _NOT_NAMES]


# Grades of one scale that a dosing table gives a row each: "Mild/Moderate: 500 mg every 12
# hours ... Severe: 875 mg every 12 hours". Each word's group: the words of one grade.
_GRADE = re.compile(
    r"\b(?P<mild>mild\w*)\b|\b(?P<moderate>moderate\w*)\b|\b(?P<severe>severe\w*)\b", re.IGNORECASE
)
# Grades written together name one row ("Mild/Moderate", "mild to moderate", "moderate or severe").
_GRADES_JOINED = re.compile(r"^[\s/,-]*(?:(?:or|and|to)\b)?[\s/,-]*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.;!?]\s+(?=[A-Z])")
# How far back from a dose its row's grade is looked for.
GRADE_REACH_CHARS = 300


def _graded_otherwise(clause: str, text: str, value: Value) -> bool:
    """Whether the question asks a dose of some grade ("for a mild or moderate infection") and
    the grade nearest before the dose in the quote is another one: a flattened dosing table's
    next row ("Severe 875 mg every 12 hours or 500 mg every 8 hours")."""
    wanted = {m.lastgroup for m in _GRADE.finditer(clause)}
    if not wanted:
        return False
    # Within the dose's own sentence: a grade in an earlier sentence is about something else.
    start = _sentence_start(text, value, GRADE_REACH_CHARS)
    found = list(_GRADE.finditer(text, start, value.start))
    if not found:
        return False
    row = {found[-1].lastgroup}
    for earlier, later in zip(reversed(found[:-1]), reversed(found[1:]), strict=True):
        if not _GRADES_JOINED.match(text[earlier.end() : later.start()]):
            break
        row.add(earlier.lastgroup)
    return not row & wanted


# Within this many characters of "renew", the agreement or its term must be named.
RENEWAL_REACH_CHARS = 100
_RENEWAL_OF_TERM = re.compile(
    r"\b(?:this|the|such)\s+(?:agreement|contract|lease|licen[cs]e|term)\b|\bterms?\b"
    r"|\bperiods?\b|\bsuccessive\b|\bautomatic\w*|\bexpir\w*|\byears?\b|\bmonths?\b",
    re.IGNORECASE,
)
# A question about the lower court's number ("the case number in the district court"), and a
# quote that names such a court.
_LOWER_COURT = re.compile(
    r"\b(?:district|trial|lower|superior|county|bankruptcy|below)\b|\bD\.\s?C\.", re.IGNORECASE
)


def _docket_of_court_asked(clause: str, text: str) -> bool:
    """A docket number is its own role ("No. 12-345"), but one asked of the lower court must
    be given beside that court's name."""
    if _LOWER_COURT.search(clause) is None:
        return True
    return _LOWER_COURT.search(text) is not None


# A period that counts from an event ("within 15 days after notice", "30 days' prior written
# notice") is a notice or cure period, not how long the agreement runs.
_FROM_AN_EVENT_BEFORE = re.compile(
    r"\b(?:within|upon|on|giving|give|gives|with)\s+(?:\w+\s+){0,2}$", re.I
)
_FROM_AN_EVENT_AFTER = re.compile(
    r"^\W{0,3}(?:\(\d+\)\s*)?(?:(?:days?|months?)['’]?\s+)?(?:after|following|from|of|prior|advance|"
    r"written|notice|before)\b(?:\s+\w+){0,3}?\s*(?:notice|receipt|request|breach|demand)",
    re.I,
)


def _notice_or_cure_period(text: str, value: Value) -> bool:
    """Whether the period counts from an event, or runs after the term ("for seven years after
    its termination": how long confidentiality survives)."""
    before = text[max(0, value.start - 30) : value.start]
    after = text[value.end : value.end + 60]
    return bool(
        _FROM_AN_EVENT_BEFORE.search(before)
        or _FROM_AN_EVENT_AFTER.search(after)
        or AFTER_THE_TERM.match(after)
    )


def _of_another_document(text: str, value: Value) -> bool:
    """Whether the date belongs to another document the sentence names: "supersedes the Mutual
    Disclosure Agreement dated as of May 1" (the last document noun before the date has a
    name of its own, not "this" or "the")."""
    before = text[max(0, value.start - DATE_CUE_BEFORE_CHARS) : value.start]
    nouns = list(_DOCUMENT_NOUN.finditer(before))
    return bool(nouns) and not nouns[-1].group("this")


def date_asked(clause: str) -> str | None:
    """The event a date clause asks about ("argued", "decided", "effective", "made"), if any."""
    return next((name for name, cue in _DATE_ASKED if cue.search(clause)), None)


def date_said(text: str, value: Value) -> str | None:
    """The event `text` says the date `value` is of, read from the words nearest it."""
    return _date_cue(text, value)


def _date_cue(text: str, value: Value) -> str | None:
    """The class of the cue nearest before `value` (else the first right after it)."""
    before = list(
        _DATE_CUE.finditer(text[max(0, value.start - DATE_CUE_BEFORE_CHARS) : value.start])
    )
    if before:
        return before[-1].lastgroup
    after = _DATE_CUE.search(text[value.end : value.end + DATE_CUE_AFTER_CHARS])
    return after.lastgroup if after else None


def _shares_question_noun(clause: str, text: str) -> bool:
    nouns = set(terms(clause)) - _GENERIC_QUESTION_STEMS
    return not nouns or bool(nouns & set(terms(text)))
