"""Pipeline results as the plain rows app/services stores (app may not import pipelines)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pipelines.retrieval.evidence import Evidence
from pipelines.summary.support import SentenceSupport


def quote_rows(quotes: Sequence[Evidence]) -> list[dict[str, Any]]:
    """Quotes (an answer's, or key passages) as JSON-ready dicts, in the order given."""
    return [dataclasses.asdict(quote) for quote in quotes]


def sentence_rows(checked: Sequence[SentenceSupport]) -> list[dict[str, Any]]:
    """A summary's checked sentences as app.services.results.save_summary stores them."""
    return [
        {
            "text": item.text,
            "status": item.status,
            "quotes": quote_rows(item.quotes),
            "missing": list(item.missing),
        }
        for item in checked
    ]
