"""The CUAD dev contracts as our pipeline splits them, and where each labelled clause lies.

CUAD's labels are text spans as CUAD's own PDF extraction saw them ("19t h day of December"),
so a label is found in our text after both are reduced to lowercase letters and digits alone.
A label's passages are those that hold its first occurrence whole (the splitter's overlap often
gives two), else those that overlap it; annotators mark a party or a date where it is first
stated, and a clause occurs once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipelines.documents import PageText, Passage, document_text
from pipelines.ingest.parse import parse_pdf
from pipelines.ingest.split import split_into_passages
from pipelines.protocols import TokenCounter

METADATA = "cuad_train_metadata.json"
_KEPT = re.compile(r"[a-z0-9]")


@dataclass(frozen=True)
class Contract:
    file: str
    pages: tuple[PageText, ...]
    passages: tuple[Passage, ...]
    labels: dict[str, list[str]]  # CUAD field -> labelled spans


@dataclass(frozen=True)
class LabelSpan:
    start: int  # document_text offsets of the first occurrence
    end: int
    passage_ordinals: frozenset[int]


def load_contracts(
    legal_dir: Path, count_tokens: TokenCounter, max_tokens: int, fields: Sequence[str]
) -> list[Contract]:
    """Every contract of the metadata, parsed and split as ingest does."""
    entries = json.loads((legal_dir / METADATA).read_text())
    contracts = []
    for entry in entries:
        parsed = parse_pdf(legal_dir / f"cuad_train_{entry['file']}")
        passages = split_into_passages(
            parsed.pages, count_tokens=count_tokens, max_tokens=max_tokens
        )
        labels = {name: list(entry.get(name) or []) for name in fields}
        contracts.append(Contract(entry["file"], parsed.pages, tuple(passages), labels))
    return contracts


def _normalised(text: str) -> tuple[str, list[int]]:
    """The text's letters and digits, lowercased, and each kept character's original offset."""
    kept, offsets = [], []
    for offset, char in enumerate(text.lower()):
        if _KEPT.match(char):
            kept.append(char)
            offsets.append(offset)
    return "".join(kept), offsets


_NORMALISED: dict[str, tuple[str, list[int]]] = {}


def locate(contract: Contract, label: str) -> LabelSpan | None:
    """Where `label` first occurs in the contract, or None when our text does not hold it."""
    if contract.file not in _NORMALISED:
        _NORMALISED[contract.file] = _normalised(document_text(contract.pages))
    haystack, offsets = _NORMALISED[contract.file]
    needle, _ = _normalised(label)
    if not needle:
        return None
    found = haystack.find(needle)
    if found < 0:
        return None
    start, end = offsets[found], offsets[found + len(needle) - 1] + 1
    holding = {p.ordinal for p in contract.passages if p.start_char <= start and end <= p.end_char}
    if not holding:
        holding = {
            p.ordinal for p in contract.passages if p.start_char < end and start < p.end_char
        }
    return LabelSpan(start, end, frozenset(holding))


def relevant_passages(contract: Contract, field: str) -> tuple[frozenset[int], int, int]:
    """Ordinals of the passages holding any label of `field`, with the number of labels found
    and the number given."""
    spans = [locate(contract, label) for label in contract.labels.get(field, [])]
    found = [span for span in spans if span is not None]
    ordinals = frozenset(o for span in found for o in span.passage_ordinals)
    return ordinals, len(found), len(spans)
