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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.answer.asked import DATE, NAMES, PERIOD, PLACE, asked_kind
from pipelines.documents import Passage
from pipelines.facts.fields import all_fields
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
