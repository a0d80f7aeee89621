"""Answers from key facts: a question that asks what a stored key fact already says ("Which
law governs this agreement?" and the governing-law fact) is answered by that fact, its value
and its quoted evidence, with no model call.

The key fact was found by retrieval for its field, read from the top evidence and validated (a
jurisdiction from the list, a parsed date, party names that occur in the text: pipelines.facts.extract);
a free-form answer of a small model to the same question is checked only afterwards. So the
fact is the better answer, and the same one the Key facts tab shows.

A question matches a field when both hold: the kind of thing it asks for (pipelines.
answer_types) is what the field's values are (a place for a jurisdiction, names for parties),
and its meaning is close to the field's own question: cosine >= MIN_SIMILARITY of the sentence
embeddings, or without an embedder, most of the field question's content words. The kind
guard is what keeps "When can the agreement be terminated?" (no kind) away from the expiration
date, however close the two sentences embed.

A field the facts job searched and found nothing for (a contract with no governing-law clause,
or one whose jurisdiction is redacted) answers too: that none was found, rather than the
model's guess. The facts search is the stronger reader for its fields (it reads the passages
retrieved for the field and keeps only a value that validates); a small model asked the same
question names a place from the addresses or the recitals ("the China JV Operating
Agreement"), which the support check cannot catch, as the place does occur in the document.
The caller quotes the passages closest to the question beside it, so the reader can see why.

Questions whose wording names what a fact holds are matched by that wording first (`_CUED`),
whatever kind they ask for: "What did the court decide?" (the disposition read from the
conclusion), "Who is the appellant?" (the party the caption gives that role), "What is the dose
for adults?" (the dose rows for that population), "What are the contraindications?", "When
does the agreement expire and does it renew?" (both clauses). The cues are ordinary question
forms of each genre, and a cue counts only where the document has that fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.answer.asked import DATE, NAMES, PERIOD, PLACE, asked_kind, without_set_aside
from pipelines.answer.specifics import specifics
from pipelines.documents import Passage
from pipelines.facts.fields import all_fields
from pipelines.facts.label_dosing import POPULATION
from pipelines.facts.schema import FieldSpec
from pipelines.protocols import Embedder
from pipelines.retrieval.bm25 import terms
from pipelines.retrieval.evidence import DocumentSentences, Evidence
from pipelines.retrieval.quotes import sentence_quote

# Cosine of the question's and the field question's embeddings (all-MiniLM-L6-v2: paraphrases
# such as "What law governs the contract?" score 0.62-0.75 against the field's question, and
# "Who can terminate the agreement?" 0.60 against "Who are the parties to this agreement?").
MIN_SIMILARITY = 0.62
# Without an embedder: the share of the field question's content words the question has.
MIN_SHARED_TERMS = 0.6
VALUE_TYPES_FOR_KIND = {
    PLACE: frozenset({"jurisdiction"}),
    DATE: frozenset({"date"}),
    NAMES: frozenset({"parties", "case_parties", "court"}),
    PERIOD: frozenset({"duration", "term"}),
}


@dataclass(frozen=True)
class KnownFact:
    """A stored key fact (app's Fact row, as plain data): its field's name, label and value, the
    document character spans [start, end) of the sentences it quotes, and its first quote and
    page as stored. `missing`: the facts job searched for the field and found no value (value,
    spans and quote are then empty)."""

    field: str
    label: str
    value: str
    spans: tuple[tuple[int, int], ...] = ()
    missing: bool = False
    quote: str = ""
    page: int | None = None
    origin: str = ""  # where the value was read: "caption, p. 1", "clause 12.1, p. 9"
    table: tuple[dict[str, Any], ...] = ()  # rows of a value of several parts (doses)


@dataclass(frozen=True)
class FactAnswer:
    fact: KnownFact
    text: str
    quotes: list[Evidence]
    similarity: float
    found: bool = True  # False: the field was searched and holds no value (KnownFact.missing)


def not_found_text(label: str, *, num_quotes: int) -> str:
    """What a missing fact answers: none found, and where the closest passages are."""
    text = (
        f"No {label[:1].lower()}{label[1:]} found: the key-facts search read the passages most "
        "likely to state it, and none does."
    )
    if num_quotes:
        text += " The passages closest to the question are quoted below."
    return text


def fact_answer(
    question: str,
    facts: Sequence[KnownFact],
    sentences: DocumentSentences,
    passages: Sequence[Passage],
    *,
    embedder: Embedder | None = None,
) -> FactAnswer | None:
    """The answer a stored fact gives to `question`, or None when no fact matches it."""
    cued = _cued_answer(question, facts, sentences, passages)
    if cued is not None:
        return cued
    kind = asked_kind(question)
    wanted = VALUE_TYPES_FOR_KIND.get(kind or "")
    if not wanted:
        return None
    specs = all_fields()
    candidates = [
        (fact, specs[fact.field])
        for fact in facts
        if (fact.missing or (fact.value.strip() and fact.spans))
        and fact.field in specs
        and specs[fact.field].value_type in wanted
    ]
    if not candidates:
        return None
    scores = _similarities(question, [spec for _, spec in candidates], embedder)
    best = int(np.argmax(scores))
    threshold = MIN_SIMILARITY if embedder is not None else MIN_SHARED_TERMS
    if scores[best] < threshold:
        return None
    fact = candidates[best][0]
    if narrower_than(question, [fact]):
        return None
    if fact.missing:
        text = not_found_text(fact.label, num_quotes=0)
        return FactAnswer(
            fact=fact, text=text, quotes=[], similarity=float(scores[best]), found=False
        )
    quotes = [
        sentence_quote(sentences, passages, span, score=float(scores[best]))
        for span in fact.spans
        if 0 <= span[0] < span[1] <= len(sentences.text)
    ]
    if not quotes:
        return None
    text = f"{fact.label}: {fact.value} [p. {quotes[0].page}]"
    return FactAnswer(fact=fact, text=text, quotes=quotes, similarity=float(scores[best]))


def _similarities(
    question: str, specs: Sequence[FieldSpec], embedder: Embedder | None
) -> np.ndarray:
    if embedder is not None:
        vectors = np.asarray(embedder.embed([question, *(s.question for s in specs)]))
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors[1:] @ vectors[0]
    asked = set(terms(question))
    shares = []
    for spec in specs:
        wanted = set(terms(spec.question))
        shares.append(len(wanted & asked) / len(wanted) if wanted else 0.0)
    return np.asarray(shares)


def fact_for(question: str, facts: Sequence[KnownFact]) -> KnownFact | None:
    """The fact whose label's every word is in the question ("Non-compete" for "Which
    contracts have a non-compete clause?"), with a value; the longest label wins. A collection's
    table asks this of each document: a question about every document names the field it wants,
    and needs no field question or kind (fact_answer's guard) to be matched."""
    asked = set(terms(question))
    best: KnownFact | None = None
    for fact in facts:
        label_terms = set(terms(fact.label))
        if not fact.value.strip() or not label_terms or not label_terms <= asked:
            continue
        if best is None or len(label_terms) > len(set(terms(best.label))):
            best = fact
    return best


# Question forms that name a field, in the order they are tried: (fields, pattern). Several
# fields answer together ("When does it expire and does it renew?").
_CUED: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (fields, re.compile(pattern, re.IGNORECASE))
    for fields, pattern in (
        (("expiration_date", "renewal_term"), r"\bexpir\w*\b.*\brenew\w*|\brenew\w*\b.*\bexpir\w*"),
        (("renewal_term",), r"\brenew\w*"),
        (("expiration_date",), r"\bexpir\w*|\bwhen\s+does\s+(?:the|this)\s+(?:agreement|contract|"
                               r"lease|licen[cs]e)\s+end\b|\bhow\s+long\s+(?:does|will)\s+(?:the|"
                               r"this)\s+(?:agreement|contract|lease|licen[cs]e)\s+(?:last|run|remain|continue|stay)\b"),
        (("judges",), r"\b(?:which|what|who|name\s+the)\s+(?:\w+\s+){0,2}(?:judges?|justices?)\b"
                      r"|\bwho\s+(?:wrote|authored)\b|\b(?:judges?|justices?)\s+(?:sat|were|heard)\b"
                      r"|\bpanel\b(?!.*\b(?:decide|decided|hold|held|rule|ruled|do|did)\b)"),
        (("disposition",), r"\b(?:holding|decision|disposition|outcome|ruling|verdict)\b|\bwhat\s+did"
                           r"\s+the\s+(?:court|judges?|panel)\s+(?:decide|hold|rule|do)\b|\bhow\s+did"
                           r"\s+the\s+(?:court|appeal|case)\b|\bwas\s+(?:it|the\s+\w+)\s+(?:affirmed|"
                           r"reversed|remanded|vacated|dismissed)\b"),
        (("lower_docket_number",), r"\b(?:docket|case)\s+(?:number|no\.?)\b.*\b(?:below|lower\s+"
                                   r"court|district\s+court|trial\s+court)\b"),
        (("docket_number",), r"\bdocket\b|\bcase\s+(?:number|no\.?)\b"),
        (("boxed_warning",), r"\bboxed\s+warning|\bblack[- ]box"),
        (("contraindications",), r"\bcontraindicat\w*|\bwho\s+(?:should|must)\s+not\s+(?:take|use|be"
                                 r"\s+given)\b|\bwhen\s+(?:should|must)\s+(?:it|this\s+\w+)\s+not\s+be"
                                 r"\s+used\b|\bdo\s+not\s+use\b"),
        (("interactions",), r"\binteract\w*|\b(?:taken|take|used?)\s+with\s+other\s+(?:drugs|"
                            r"medicines|medications)\b"),
        (("dosage",), r"\b(?:dose|doses|dosage|dosing|directions)\b|\bhow\s+(?:much|many|often)\b.*"
                      r"\b(?:take|taken|give|given|administer\w*|tablets?|capsules?)\b"),
        (("indications",), r"\bindicat(?:ed|ions?)\b|\bwhat\s+is\s+(?:it|this\s+(?:drug|medicine|"
                           r"medication|product))\s+(?:used\s+)?for\b|\bwhat\s+does\s+(?:it|this\s+\w+)"
                           r"\s+treat\b|\buses\b|\b(?:approved|used|prescribed)\s+(?:to\s+treat|for)\b"),
        (("warnings",), r"\bwarnings?\b|\bprecautions?\b"),
        (("parties", "case_parties"), r"\bparties\b"),
    )
)  # fmt: skip
# Fields whose cue, when the document has no such fact, must not fall to a later cue.
_NO_FALLBACK = frozenset({("lower_docket_number",)})
# "Who is the appellant?", "Which party is the licensee?": a role the parties fact gives.
_ROLE_ASKED = re.compile(
    r"\b(?:who|which\s+(?:party|company|side|entity))\s+(?:is|are|was|were|acts\s+as|serves\s+as)"
    r"\s+(?:the\s+)?([a-z-]+?)s?\b",
    re.IGNORECASE,
)
_ROLE_OF = re.compile(r"(?P<name>[^;]+?)\s+\((?P<role>[^()]+)\)\s*(?:;|$)")


def _cued_answer(
    question: str,
    facts: Sequence[KnownFact],
    sentences: DocumentSentences,
    passages: Sequence[Passage],
) -> FactAnswer | None:
    """The answer of the facts that the question's wording names, or None. None too when the
    question names more than the fact holds (narrower_than)."""
    by_field = {fact.field: fact for fact in facts}
    question = without_set_aside(question)
    role = _role_answer(question, by_field.get("parties"), sentences, passages)
    if role is not None:
        return role
    for fields, pattern in _CUED:
        if not pattern.search(question):
            continue
        present = [by_field[name] for name in fields if name in by_field]
        if not present:
            if fields in _NO_FALLBACK:
                return None  # the lower court's number asked: never the appeal's
            continue
        if len(fields) > 1 and fields[0] == "parties":  # the parties with roles, else the case
            present = [next((f for f in present if f.value and f.spans), present[0])]
        if narrower_than(question, present):
            return None
        return _answer_from(question, present, sentences, passages)
    return None


# The words of the cues themselves (a cue's match, "how much ibuprofen does each tablet" or
# "which district judge", may hold the question's specifics).
_CUE_WORDS = (
    "how much many often long dose doses dosage dosing directions docket number judges judge "
    "justices justice panel wrote authored decide decided hold held holding outcome disposition "
    "verdict expire expires expiration renew renews renewal warning warnings precautions boxed "
    "contraindicated contraindications interact interactions indicated indications treat uses"
)
# A question the fact holds none of this many specifics of asks something narrower.
MIN_UNHELD_SPECIFICS = 3


def narrower_than(question: str, facts: Sequence[KnownFact]) -> bool:
    """Whether `question` names more than `facts` hold: three or more of its specifics
    (pipelines.answer.specifics), and most of them, in none of the facts' values, quotes,
    labels or table rows. "How often should a patient whose GFR is below 10 mL/min take it?"
    is not answered by the label's general dosage fact, nor "Which district judge ruled on the
    case below?" by the panel, nor "What did the court hold about the new game?" by
    "affirmed"."""
    held_text = " ".join(
        " ".join(
            [fact.label, fact.field.replace("_", " "), fact.value, fact.quote, fact.origin]
            + [" ".join(str(v) for v in row.values()) for row in fact.table]
        )
        for fact in facts
    )
    wanted = specifics(question, also_generic=(_CUE_WORDS,))
    unheld = wanted - set(terms(held_text))
    return len(unheld) >= MIN_UNHELD_SPECIFICS and len(unheld) * 2 > len(wanted)


def _answer_from(
    question: str,
    facts: Sequence[KnownFact],
    sentences: DocumentSentences,
    passages: Sequence[Passage],
) -> FactAnswer | None:
    found = [fact for fact in facts if not fact.missing and fact.value.strip() and fact.spans]
    if not found:
        if all(fact.missing for fact in facts):
            text = not_found_text(facts[0].label, num_quotes=0)
            return FactAnswer(fact=facts[0], text=text, quotes=[], similarity=1.0, found=False)
        return None
    parts, quotes = [], []
    for fact in facts:
        if fact not in found:
            if fact.missing:
                parts.append(f"No {fact.label[:1].lower()}{fact.label[1:]} found.")
            continue
        rows = _rows_for(question, fact)
        spans = [(row["start_char"], row["end_char"]) for row in rows] if rows else fact.spans
        fact_quotes = [
            sentence_quote(sentences, passages, span, score=1.0)
            for span in spans
            if 0 <= span[0] < span[1] <= len(sentences.text)
        ]
        if not fact_quotes:
            continue
        if rows:
            population = rows[0]["population"]
            value = "; ".join(row["dose"] for row in rows)
            parts.append(f"{fact.label} ({population}): {value} [p. {fact_quotes[0].page}]")
        else:
            parts.append(f"{fact.label}: {fact.value} [p. {fact_quotes[0].page}]")
        quotes += fact_quotes
    if not quotes:
        return None
    return FactAnswer(fact=found[0], text=" ".join(parts), quotes=quotes, similarity=1.0)


def _rows_for(question: str, fact: KnownFact) -> list[dict[str, Any]]:
    """The dose rows of the population the question names ("for adults", "in children")."""
    asked = POPULATION.search(question)
    if asked is None or not fact.table:
        return []
    stem = asked.group(0).split()[0].casefold().rstrip("s")[:5]  # adult, child, pedia, ...
    return [
        row
        for row in fact.table
        if stem in str(row.get("population", "")).casefold()
        and isinstance(row.get("start_char"), int)
        and isinstance(row.get("end_char"), int)
    ]


def _role_answer(
    question: str,
    parties: KnownFact | None,
    sentences: DocumentSentences,
    passages: Sequence[Passage],
) -> FactAnswer | None:
    """The parties with the role the question asks about, from the parties fact."""
    asked = [match.group(1).casefold() for match in _ROLE_ASKED.finditer(question)]
    if not asked or parties is None or not parties.value or not parties.spans:
        return None
    lines = []
    for wanted in dict.fromkeys(asked):  # "Who is the appellant, and who is the appellee?"
        named = [
            match.group("name").strip()
            for match in _ROLE_OF.finditer(parties.value)
            if _same_role(wanted, match.group("role"))
        ]
        if not named:
            return None  # a role the fact does not give: the model and the quotes answer
        lines.append(f"{wanted.capitalize()}: {'; '.join(named)}")
    quotes = [
        sentence_quote(sentences, passages, span, score=1.0)
        for span in parties.spans
        if 0 <= span[0] < span[1] <= len(sentences.text)
    ]
    if not quotes:
        return None
    text = f"{'; '.join(lines)} [p. {quotes[0].page}]"
    return FactAnswer(fact=parties, text=text, quotes=quotes, similarity=1.0)


def _same_role(wanted: str, role: str) -> bool:
    """Whether the fact's `role` ("Defendants-Appellees") is the one asked ("appellee")."""
    words = [word.rstrip("s") for word in re.split(r"[-\s]+", role.casefold()) if word]
    return wanted.rstrip("s") in words or wanted.rstrip("s") == "".join(words)
