"""What kind of question a collection is asked, and whether a document's key facts answer it.

A question about every document ("Which of these contracts have a non-compete clause?", "List
each label's boxed warning") is answered document by document and shown as a table; any other
question is answered from the passages that match it best across the collection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.retrieve import terms

_NOUNS = (
    r"(?:documents?|contracts?|agreements?|papers?|labels?|files?|studies|study|articles?|"
    r"reports?|leases?|policies|policy|records?|opinions?|cases?|trials?)"
)
_EVERY_DOCUMENT = (
    re.compile(rf"\bwhich\s+(?:of\s+)?(?:the|these|those|our|my|all)?\s*(?:\w+\s+)?{_NOUNS}\b"),
    re.compile(rf"\b(?:each|every)\s+(?:of\s+(?:the|these|those)\s+)?(?:\w+\s+)?{_NOUNS}\b"),
    re.compile(r"\b(?:each|every)\s+\w+(?:'s|s')\b"),  # "each label's boxed warning"
    re.compile(rf"\ball\s+(?:of\s+)?(?:the|these|those)\s+(?:\w+\s+)?{_NOUNS}\b"),
    re.compile(rf"\b(?:do|does)\s+any\s+(?:of\s+)?(?:the|these|those)?\s*(?:\w+\s+)?{_NOUNS}\b"),
    re.compile(r"\b(?:per|by)\s+document\b|\bdocument\s+by\s+document\b"),
)


def asks_every_document(question: str) -> bool:
    """Whether the question wants an answer from each document (see the module docstring)."""
    lowered = " ".join(question.lower().split())
    return any(pattern.search(lowered) for pattern in _EVERY_DOCUMENT)


@dataclass(frozen=True)
class KnownFact:
    """A document's stored key fact (app's Fact row, as plain data)."""

    field: str
    label: str
    value: str
    quote: str
    page: int | None


def fact_for(question: str, facts: Sequence[KnownFact]) -> KnownFact | None:
    """The fact whose label's every word is in the question ("Non-compete" for "Which
    contracts have a non-compete clause?"), with a value; the longest label wins."""
    asked = set(terms(question))
    best: KnownFact | None = None
    for fact in facts:
        label_terms = set(terms(fact.label))
        if not fact.value.strip() or not label_terms or not label_terms <= asked:
            continue
        if best is None or len(label_terms) > len(set(terms(best.label))):
            best = fact
    return best
