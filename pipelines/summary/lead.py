"""A summary's first lines from the document's key facts: for an opinion, the court, the parties
and what was decided; for a drug label, the drug, its boxed warning, what it is for and the
adult dose; for a contract, what agreement it is, between whom, for how long, under which law.

A small model asked to summarize often leaves these out, or names them wrongly, and a summary
without them is of little use to a lawyer or a clinician. The key facts job has already found
them (retrieval for each field, the value read from the top evidence and checked:
pipelines.facts.extract), each with the sentences it rests on. So the summary leads with them:
one line per item, in the order above ("Court: Supreme Court of the United States."), supported
by construction, each with its facts' quotes and page. The model's sentences follow, each
checked on its own (pipelines.summary.support); when none of them holds, the lead still stands.

Which lines: by the document's sub-kind, told by the fields its facts belong to (a document's
facts all come from one schema: pipelines.facts.fields). A line takes the first of its fields
that has a value (an opinion's "case_parties" caption, else its "parties" with their roles),
and some add a second ("affirmed, on October 5, 2020"). A long value (a boxed warning, the
indications) is shortened to its first sentence, or cut at a word with an ellipsis, while its
quote stays the whole sentence. A fact the job searched for and did not find is left out: the
lead states only what the document says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.answer.from_facts import KnownFact
from pipelines.documents import Passage
from pipelines.facts.fields import SCHEMAS
from pipelines.ingest.sentences import split_sentences
from pipelines.kinds import CONTRACT, LABEL, OPINION
from pipelines.retrieval.evidence import DocumentSentences, Evidence
from pipelines.retrieval.quotes import sentence_quote
from pipelines.summary.support import SUPPORTED, SentenceSupport
from pipelines.values.dates import find_dates

# A value longer than this is shortened (its first sentence, else cut at a word).
MAX_VALUE_CHARS = 160
ELLIPSIS = "…"
_ADULT = re.compile(r"\badults?\b", re.IGNORECASE)
# A dose row's own "Adults:" label, which the line's label says already.
_ADULT_LABEL = re.compile(r"^\s*adults?\s*[:–-]\s*", re.IGNORECASE)


@dataclass(frozen=True)
class LeadLine:
    """One line of the lead: `fields` are read in order, and `phrase` turns the values found
    (by field name, each present only with a value and a quote) into the line, or None. With
    `alternatives`, the first field found is the line's and the others are not read."""

    fields: tuple[str, ...]
    phrase: Callable[[dict[str, str]], str | None]
    alternatives: bool = False


def _first(label: str, *names: str) -> Callable[[dict[str, str]], str | None]:
    def phrase(values: dict[str, str]) -> str | None:
        value = next((values[name] for name in names if name in values), None)
        return f"{label}: {_short(_flat(value))}" if value else None

    return phrase


def _decision(values: dict[str, str]) -> str | None:
    outcome, date = _flat(values.get("disposition")), _flat(values.get("decision_date"))
    if outcome and date:
        return f"Decision: {outcome}, on {date}"
    if outcome:
        return f"Decision: {outcome}"
    return f"Decided: {date}" if date else None


def _dose(values: dict[str, str]) -> str | None:
    """The adult dose where the dosage (a value, or one row a line) names adults."""
    dosage = values.get("dosage")
    if not dosage:
        return None
    rows = [row.strip(" -•\t") for row in dosage.splitlines() if row.strip(" -•\t")]
    if len(rows) == 1:  # rows may be written on one line: "Adults: 10 mg daily; Children: 5 mg"
        rows = [row.strip() for row in rows[0].split("; ")]
    adult = next((row for row in rows if _ADULT.search(row)), None)
    if adult is None:
        return f"Dose: {_short(rows[0])}"
    return f"Adult dose: {_short(_ADULT_LABEL.sub('', adult))}"


def _term(values: dict[str, str]) -> str | None:
    """How long the contract runs: its end ("ends March 31, 2026"), a period or "perpetual",
    then its renewal."""
    ends, renews = _flat(values.get("expiration_date")), _flat(values.get("renewal_term"))
    if ends and find_dates(ends):
        ends = f"ends {ends}"
    if ends and renews:
        return f"Term: {ends}; renews for {renews}"
    if ends:
        return f"Term: {ends}"
    return f"Renewal term: {renews}" if renews else None


LEADS: dict[str, tuple[LeadLine, ...]] = {
    OPINION: (
        LeadLine(("court",), _first("Court", "court")),
        LeadLine(
            ("case_parties", "parties"),
            _first("Parties", "case_parties", "parties"),
            alternatives=True,
        ),
        LeadLine(("disposition", "decision_date"), _decision),
    ),
    LABEL: (
        LeadLine(("drug_name",), _first("Drug", "drug_name")),
        LeadLine(("boxed_warning",), _first("Boxed warning", "boxed_warning")),
        LeadLine(("indications",), _first("Indications", "indications")),
        LeadLine(("dosage",), _dose),
    ),
    CONTRACT: (
        LeadLine(("document_name",), _first("Agreement", "document_name")),
        LeadLine(("parties",), _first("Parties", "parties")),
        LeadLine(("expiration_date", "renewal_term"), _term),
        LeadLine(("governing_law",), _first("Governing law", "governing_law")),
    ),
}
# Fields of each sub-kind beyond its schema's today (the facts job may store them).
_MORE_FIELDS = {
    OPINION: {"judges", "lower_docket_number", "parties"},
    LABEL: {"drug_name", "warnings", "interactions"},
    CONTRACT: set(),
}


def lead_sentences(
    facts: Sequence[KnownFact], sentences: DocumentSentences, passages: Sequence[Passage]
) -> list[SentenceSupport]:
    """The lead of the document whose key facts are `facts` (module docstring): one supported
    line per item that has a value and a quote; a line that repeats an earlier one's value is
    not said twice. None for a sub-kind without a lead (a guideline, a paper) or no facts."""
    subkind = subkind_of(facts)
    if subkind is None:
        return []
    found = {fact.field: fact for fact in facts if not fact.missing and _value(fact)}
    lead: list[SentenceSupport] = []
    said: set[str] = set()
    for line in LEADS[subkind]:
        values: dict[str, str] = {}
        quotes: list[Evidence] = []
        for name in line.fields:
            fact = found.get(name)
            fact_quotes = _quotes(fact, sentences, passages) if fact else []
            if fact_quotes and _value(fact).casefold() not in said:
                values[name] = _value(fact)
                quotes += [quote for quote in fact_quotes if quote not in quotes]
                if line.alternatives:
                    break
        text = line.phrase(values) if values else None
        if text is None:
            continue
        said.update(value.casefold() for value in values.values())
        text = text if text.endswith(ELLIPSIS) else f"{text}."
        lead.append(SentenceSupport(text, SUPPORTED, quotes, term_share=1.0))
    return lead


def subkind_of(facts: Sequence[KnownFact]) -> str | None:
    """The sub-kind with a lead whose fields the facts are (searched for or found), or None."""
    names = {fact.field for fact in facts}
    fields = {kind: {s.name for s in SCHEMAS[kind]} | _MORE_FIELDS[kind] for kind in LEADS}
    # A field two sub-kinds share ("parties") does not tell them apart.
    shared = {
        name
        for kind in fields
        for other in fields
        if other != kind
        for name in fields[kind] & fields[other]
    }
    scores = {kind: len(names & (kind_fields - shared)) for kind, kind_fields in fields.items()}
    best = max(scores, key=lambda kind: scores[kind])
    return best if scores[best] else None


def _value(fact: KnownFact | None) -> str:
    """The fact's value, spaces collapsed within each line (a dosage may keep a row a line)."""
    if fact is None:
        return ""
    lines = [" ".join(line.split()) for line in fact.value.splitlines()]
    return "\n".join(line for line in lines if line).rstrip(".;, ")


def _quotes(
    fact: KnownFact, sentences: DocumentSentences, passages: Sequence[Passage]
) -> list[Evidence]:
    return [
        sentence_quote(sentences, passages, span, score=1.0)
        for span in fact.spans
        if 0 <= span[0] < span[1] <= len(sentences.text)
    ]


def _flat(value: str | None) -> str:
    return " ".join((value or "").split())


def _short(value: str | None) -> str:
    """`value`, or its first sentence when it is too long, else cut at a word with an ellipsis."""
    value = (value or "").strip().rstrip(".;, ")
    if len(value) <= MAX_VALUE_CHARS:
        return value
    spans = split_sentences(value)
    if spans:
        start, end = spans[0]
        first = value[start:end].strip().rstrip(".;, ")
        if len(first) <= MAX_VALUE_CHARS:
            return first
    cut = value[: MAX_VALUE_CHARS + 1].rsplit(" ", 1)[0].rstrip(".;:,- ")
    return f"{cut} {ELLIPSIS}"
