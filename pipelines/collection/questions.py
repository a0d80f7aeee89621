"""What kind of question a collection is asked.

A question about every document ("Which of these contracts have a non-compete clause?", "List
each label's boxed warning") is answered document by document and shown as a table; any other
question is answered from the passages that match it best across the collection.
"""

from __future__ import annotations

import re

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
