"""Scoring for bench/quality.py: CUAD's labels turned into gold values, and the checks of an
answer, a key fact or a summary against them. Plain functions, no model.

CUAD's labels are spans as CUAD's own PDF extraction saw them ("19t h day of December"), so a
label is found in our text after both are reduced to lowercase letters and digits.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pipelines.documents import PageText
from pipelines.values.dates import parse_date
from pipelines.values.jurisdictions import find_jurisdictions

PHRASE_WORDS = 5
MAX_PHRASE_REPEATS = 2
_KEPT = re.compile(r"[^a-z0-9]")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# A label entry that is a role or a sentence names no party: "Licensor", "the Parties".
_ROLES = frozenset(
    [
        "licensor",
        "licensee",
        "company",
        "customer",
        "supplier",
        "suppliers",
        "servicer",
        "depositor",
        "issuer",
        "custodian",
        "marketing",
        "agent",
        "fund",
        "university",
        "provider",
        "recipient",
        "party",
        "parties",
        "shareholder",
        "shareholders",
        "distributor",
    ]
)
# The label clause's opening characters locate it (page breaks may split the rest).
_PROBE_CHARS = 60


def squash(text: str) -> str:
    return _KEPT.sub("", text.lower())


def label_pages(pages: Sequence[PageText], label: str) -> list[int]:
    """Pages whose text holds the label's opening (after squashing both)."""
    probe = squash(label)[:_PROBE_CHARS]
    if not probe:
        return []
    return [page.number for page in pages if probe in squash(page.text)]


def gold_jurisdiction(labels: Sequence[str]) -> str | None:
    """The labelled governing law's jurisdiction; None when unlabelled or redacted."""
    for label in labels:
        found = find_jurisdictions(label, proper_nouns_only=False)
        if found:
            return found[-1].key  # "the laws of the State of New York (incl. ... New York)"
    return None


def gold_date(labels: Sequence[str]) -> str | None:
    for label in labels:
        value = parse_date(label)
        if value is not None:
            return value.isoformat()
    return None


def gold_party_names(labels: Sequence[str]) -> list[str]:
    """The label's names of parties: short entries that are not a role or a sentence."""
    names = []
    for label in labels:
        words = label.split()
        if len(label) > 80 or re.search(r"\b(?:referred|hereinafter|collectively)\b", label):
            continue
        if all(word.lower().strip('"“”(),.') in _ROLES for word in words):
            continue
        names.append(label.strip(' "“”(),'))
    return names


def named_parties(text: str, gold: Sequence[str]) -> int:
    """How many of the gold names `text` names: a gold name in it, or one of its "; " parts
    (four characters or more) inside a gold name."""
    squashed = squash(text)
    parts = [squash(part) for part in re.split(r";|\n| and ", text) if len(squash(part)) >= 4]
    count = 0
    for name in gold:
        key = squash(name)
        if key and (key in squashed or any(part in key for part in parts)):
            count += 1
    return count


def parties_hit(text: str, gold: Sequence[str]) -> bool:
    """At least two of the labelled names (all, when the label has one)."""
    if not gold:
        return False
    return named_parties(text, gold) >= min(2, len(gold))


def names_jurisdiction(text: str, key: str) -> bool:
    return any(m.key == key for m in find_jurisdictions(text, proper_nouns_only=False))


def any_jurisdiction(text: str) -> bool:
    return bool(find_jurisdictions(text, proper_nouns_only=True))


def quote_holds_label(quotes: Sequence[str], labels: Sequence[str]) -> bool:
    """Whether a quote and a labelled clause overlap: one's opening inside the other."""
    for quote in quotes:
        q = squash(quote)
        for label in labels:
            key = squash(label)
            if q and key and (key[:_PROBE_CHARS] in q or q[:_PROBE_CHARS] in key):
                return True
    return False


def phrase_repeats(text: str, n: int = PHRASE_WORDS) -> dict[str, int]:
    """The most repeated phrase of `n` words: its count, and how many phrases occur more than
    MAX_PHRASE_REPEATS times (issue 11: none may)."""
    words = [word.casefold() for word in _WORD.findall(text)]
    counts = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return {
        "max_phrase_count": max(counts.values(), default=0),
        "num_phrases_over_limit": sum(1 for c in counts.values() if c > MAX_PHRASE_REPEATS),
    }
