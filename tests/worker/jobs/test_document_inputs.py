"""A stored document as pipeline input: the database's kinds are the pipelines' kinds."""

from __future__ import annotations

from app.db.models import DocumentKind
from pipelines.kinds import KINDS


def test_every_stored_kind_is_one_the_pipelines_take() -> None:
    assert tuple(kind.value for kind in DocumentKind) == KINDS
