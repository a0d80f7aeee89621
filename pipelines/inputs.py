"""What the summary and answer pipelines take in: one document as plain data, and their own error."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.documents import PageText, Passage

KINDS = ("legal", "medical", "other")


@dataclass(frozen=True)
class DocumentInput:
    """A parsed document and its passages, as the worker loads them from the database.

    `kind` is "legal" (contracts and court opinions), "medical" or "other". `passages` are those
    split from `pages` (pipelines.split), in order; they may be empty only when the text is.
    """

    title: str | None
    kind: str
    pages: tuple[PageText, ...]
    passages: tuple[Passage, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.pages:
            raise ValueError("a document needs at least one page")
        # Tuples keep the input hashable and immutable even when lists are passed in.
        object.__setattr__(self, "pages", tuple(self.pages))
        object.__setattr__(self, "passages", tuple(self.passages))

    @property
    def page_numbers(self) -> tuple[int, ...]:
        return tuple(page.number for page in self.pages)
