"""Passage vectors for dense ranking: one unit vector per sentence of each passage.

A passage's dense score is the best cosine of its sentences with the query. One mean vector per
384-token passage blurs a one-sentence clause into its neighbours; the best sentence does not
(recall@3 of the labelled clause 33% -> 48% on the dev contracts: bench/results/retrieval.md).
The sentences are the passage's own (pipelines.ingest.sentences on the passage text), so they follow
from the passage alone and the worker can embed them at ingest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.ingest.sentences import split_sentences

_WORD = re.compile(r"\w")


def passage_segments(text: str) -> list[str]:
    """The texts embedded for one passage: its sentences with a letter or digit, in order; the
    whole passage when it has none (a passage always has at least one vector)."""
    segments = [text[start:end] for start, end in split_sentences(text)]
    segments = [segment for segment in segments if _WORD.search(segment)]
    return segments or [text]


@dataclass(frozen=True, eq=False)
class PassageVectors:
    """The vectors of a document's passages: passage i owns rows offsets[i]:offsets[i + 1] of
    `vectors` (unit rows, float32). Build with `from_groups` or `one_per_passage`."""

    vectors: np.ndarray  # [num_vectors, D]
    offsets: np.ndarray  # [num_passages + 1], from 0 to num_vectors

    def __post_init__(self) -> None:
        vectors = np.asarray(self.vectors, dtype=np.float32)
        offsets = np.asarray(self.offsets, dtype=np.int64)
        if vectors.ndim != 2 or offsets.ndim != 1 or len(offsets) < 1:
            raise ValueError("vectors must be [num_vectors, D] and offsets [num_passages + 1]")
        if offsets[0] != 0 or offsets[-1] != len(vectors) or np.any(np.diff(offsets) < 1):
            raise ValueError("offsets must run from 0 to num_vectors, at least one row a passage")
        object.__setattr__(self, "vectors", vectors)
        object.__setattr__(self, "offsets", offsets)

    @classmethod
    def from_groups(cls, groups: Sequence[np.ndarray]) -> PassageVectors:
        """One [k_i, D] array per passage, in passage order."""
        if not groups:
            raise ValueError("no passages")
        sizes = [len(group) for group in groups]
        return cls(np.concatenate(groups, axis=0), np.concatenate([[0], np.cumsum(sizes)]))

    @classmethod
    def one_per_passage(cls, vectors: np.ndarray) -> PassageVectors:
        """One vector per passage ([num_passages, D])."""
        return cls(vectors, np.arange(len(vectors) + 1))

    @property
    def num_passages(self) -> int:
        return len(self.offsets) - 1

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def group(self, passage_index: int) -> np.ndarray:
        """The vectors of one passage ([k, D])."""
        return self.vectors[self.offsets[passage_index] : self.offsets[passage_index + 1]]

    def scores(self, query_vector: np.ndarray) -> np.ndarray:
        """Each passage's best cosine with the query ([num_passages])."""
        # cosines: [num_vectors]; reduceat takes the max over each passage's rows
        cosines = self.vectors @ np.asarray(query_vector, dtype=np.float32)
        return np.maximum.reduceat(cosines, self.offsets[:-1]).astype(np.float64)
