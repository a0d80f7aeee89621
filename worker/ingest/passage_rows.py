"""Passages between the pipelines and the database: one mapping, by the fields both have.

The splitter makes pipelines.documents.Passage and the pipelines read it; the database keeps the
same fields (app.services.documents.NewPassage when stored, app.db.models.Passage when read),
with the passage's vectors besides. app may not import pipelines, so the mapping lives here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.services import documents
from pipelines.documents import Passage

PASSAGE_FIELDS = tuple(field.name for field in dataclasses.fields(Passage))


def new_passage(
    passage: Passage, *, embedding: bytes | None, embedding_model: str | None
) -> documents.NewPassage:
    """A split passage as the row to store; its model is kept only with its vectors."""
    return documents.NewPassage(
        **_shared_fields(passage),
        embedding=embedding,
        embedding_model=embedding_model if embedding is not None else None,
    )


def from_row(row: Any) -> Passage:
    """A stored passage (app.db.models.Passage) as the pipelines read it."""
    return Passage(**_shared_fields(row))


def _shared_fields(source: Any) -> dict[str, Any]:
    return {name: getattr(source, name) for name in PASSAGE_FIELDS}
