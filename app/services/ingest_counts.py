"""Scanned pages and bad redactions across ingests, from the ingest jobs' stats (pure functions
of app.services.monitoring's JobRecords: the monitoring page shows them). No text here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.services.monitoring import JobRecord


@dataclass(frozen=True)
class IngestCounts:
    num_stored: int  # ingest jobs that stored a new document
    num_with_ocr: int  # of those, documents with at least one page read by OCR
    num_ocr_pages: int
    ocr_mean_confidence: float | None  # over the OCR'd pages, each document weighted by pages
    num_with_redactions: int  # documents with boxes that hide readable text
    num_redactions: int
    num_hidden_chars: int


def ingest_counts(records: Iterable[JobRecord]) -> IngestCounts:
    """Counts over the succeeded ingest jobs that stored a document (not those already there)."""
    stored = [
        r.stats
        for r in records
        if r.kind == "ingest" and r.status == "succeeded" and not r.stats.get("already_present")
    ]
    ocr_pages = [_count(s, "num_ocr_pages") for s in stored]
    weighted = [
        (_count(s, "num_ocr_pages"), float(s["ocr_mean_confidence"]))
        for s in stored
        if isinstance(s.get("ocr_mean_confidence"), int | float) and _count(s, "num_ocr_pages")
    ]
    num_weighted = sum(n for n, _ in weighted)
    return IngestCounts(
        num_stored=len(stored),
        num_with_ocr=sum(1 for n in ocr_pages if n),
        num_ocr_pages=sum(ocr_pages),
        ocr_mean_confidence=(
            sum(n * c for n, c in weighted) / num_weighted if num_weighted else None
        ),
        num_with_redactions=sum(1 for s in stored if _count(s, "num_redactions")),
        num_redactions=sum(_count(s, "num_redactions") for s in stored),
        num_hidden_chars=sum(_count(s, "num_hidden_chars") for s in stored),
    )


def _count(stats: dict, key: str) -> int:
    value = stats.get(key)
    return value if isinstance(value, int) and value > 0 else 0
