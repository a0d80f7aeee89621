"""One key fact as the facts job finds it: its value, the verbatim sentences it rests on, where it
stands in the document, and how it was read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.retrieval.evidence import Evidence

SOURCES = ("model", "rule", "none")


@dataclass(frozen=True)
class Fact:
    """One key fact. `evidence` holds the quoted sentence(s) the value rests on, verbatim with
    their pages; for an empty value (source "none"), the nearest quote retrieval found, if any."""

    field: str
    label: str
    value: str
    normalized: str
    evidence: tuple[Evidence, ...]
    confidence: float
    source: str  # one of SOURCES
    # Where the value stands, for a person: "caption, p. 1", "section 2 DOSAGE AND
    # ADMINISTRATION, p. 3", "clause 12.1, p. 9"; "" for an empty value.
    origin: str = ""
    # A value of several parts as rows (a label's doses: indication, population, dose, page,
    # start_char, end_char); empty for every other field.
    table: tuple[dict[str, Any], ...] = ()

    @property
    def page(self) -> int | None:
        return self.evidence[0].page if self.evidence else None

    @property
    def is_found(self) -> bool:
        return self.source != "none"
