"""What answering one question returns (pipelines.answer.question), and the stats notes of a
partly supported or set-aside answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipelines.retrieval.evidence import Evidence


@dataclass(frozen=True)
class AnswerResult:
    text: str
    method: str  # "full_document" | "retrieval"
    cited_pages: list[int]
    used_passage_ordinals: list[int]
    stats: dict[str, Any]
    citation_source: str = "model"  # "model" | "checked" | "matched" | "prompt" | "quote" | "none"
    quotes: list[Evidence] = field(default_factory=list)
    # pipelines.answer.check: "supported" | "partly_supported" | "unsupported" | "quoted" |
    # "no_answer" ("unchecked" only on answers saved before the meaning check)
    support: str = "unchecked"
    model_text: str | None = None  # the model's own answer, when the best quote replaced it
    unsupported_claims: list[str] = field(default_factory=list)


def support_notes(missing: str, reason: str) -> dict[str, str]:
    """What a partly supported answer lacks, and why the model's text was set apart: stored in
    the answer's stats (app.services.answer_labels reads them)."""
    notes = {"support_missing": missing, "support_reason": reason}
    return {key: value for key, value in notes.items() if value}
