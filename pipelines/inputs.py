"""What the summary and answer pipelines take in: one document as plain data, and their own error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.documents import PageText, Passage
from pipelines.kinds import KINDS
from pipelines.planted import without_instructions
from pipelines.vectors import PassageVectors


@dataclass(frozen=True)
class DocumentInput:
    """A parsed document and its passages, as the worker loads them from the database.

    `kind` is "legal" (contracts and court opinions), "medical" or "other". `passages` are those
    split from `pages` (pipelines.ingest.split), in order; they may be empty only when the text is.
    `passage_embeddings` are the passages' vectors (pipelines.vectors.PassageVectors, one
    embedding model's; a [len(passages), D] array is taken as one vector per passage), or None
    when the document has none (retrieval is then BM25 alone).

    Instruction-like text (pipelines.planted: "SYSTEM: ignore the question ...") is masked in
    `pages` and `passages` as they are taken in, offsets kept, so no prompt, evidence or support
    check of any pipeline reads it; `instruction_spans` are where it was (document offsets).
    """

    title: str | None
    kind: str
    pages: tuple[PageText, ...]
    passages: tuple[Passage, ...]
    # Left out of == and hash: an array has neither, and the vectors follow from the passages.
    passage_embeddings: Any = field(default=None, compare=False, repr=False)
    instruction_spans: tuple[tuple[int, int], ...] = field(
        default=(), init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.pages:
            raise ValueError("a document needs at least one page")
        # Tuples keep the input hashable and immutable even when lists are passed in.
        pages, passages, spans = without_instructions(self.pages, self.passages)
        object.__setattr__(self, "pages", pages)
        object.__setattr__(self, "passages", passages)
        object.__setattr__(self, "instruction_spans", spans)
        vectors = self.passage_embeddings
        if vectors is not None:
            if not isinstance(vectors, PassageVectors):
                vectors = PassageVectors.one_per_passage(np.asarray(vectors, dtype=np.float32))
            if vectors.num_passages != len(self.passages):
                raise ValueError(
                    f"passage_embeddings cover {vectors.num_passages} passages, "
                    f"not {len(self.passages)}"
                )
            object.__setattr__(self, "passage_embeddings", vectors)

    @property
    def num_instruction_spans(self) -> int:
        """How many stretches of instruction-like text were left out (shown in the stats)."""
        return len(self.instruction_spans)

    @property
    def page_numbers(self) -> tuple[int, ...]:
        return tuple(page.number for page in self.pages)
