"""Passage vectors: computed with the embedder, stored on the passages as float16 bytes, read back.

Each passage stores the vectors of its sentences (pipelines.vectors), [k, D] float16 row after
row: 768 bytes a sentence at 384 dimensions. float16 changes a cosine by ~1e-3, far below what
separates a clause from its neighbours. Vectors of another model than the one asked for are
never mixed in: such a passage counts as not embedded and is embedded again.

Documents ingested before embeddings existed (or while they were off) get their vectors on
first use: `ensure_vectors` runs in the answer and summary jobs, and `longdoc embed --missing`
does the same for the whole library ahead of time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.embedding_models import STORED_DTYPE
from app.services import documents
from pipelines.protocols import Embedder
from pipelines.vectors import PassageVectors, passage_segments

logger = logging.getLogger(__name__)


def embed_passages(embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray]:
    """Per passage text, the unit vectors of its sentences ([k, D] float32), in one batched run
    over all the sentences."""
    segments = [passage_segments(text) for text in texts]
    flat = [segment for group in segments for segment in group]
    if not flat:
        return []
    # vectors: [total sentences, D]
    vectors = np.asarray(embedder.embed(flat), dtype=np.float32)
    if vectors.shape != (len(flat), embedder.dimension):
        raise ValueError(
            f"the embedder returned {vectors.shape}, not [{len(flat)}, {embedder.dimension}]"
        )
    bounds = np.cumsum([0, *[len(group) for group in segments]])
    return [vectors[bounds[i] : bounds[i + 1]] for i in range(len(segments))]


def to_bytes(group: np.ndarray) -> bytes:
    """One passage's vectors ([k, D]) as stored."""
    return np.ascontiguousarray(group, dtype=STORED_DTYPE).tobytes()


def from_rows(rows: Sequence, model: str, dimension: int) -> PassageVectors | None:
    """The rows' vectors when every row holds vectors of `model` of `dimension`, else None."""
    row_bytes = dimension * np.dtype(STORED_DTYPE).itemsize
    if not rows or any(r.embedding_model != model or not r.embedding for r in rows):
        return None
    if any(len(r.embedding) % row_bytes for r in rows):
        return None
    groups = [np.frombuffer(r.embedding, dtype=STORED_DTYPE).reshape(-1, dimension) for r in rows]
    return PassageVectors.from_groups([group.astype(np.float32) for group in groups])


def ensure_vectors(
    sessions: sessionmaker[Session],
    document_id: int,
    embedder: Embedder,
    *,
    on_embedding: Callable[[int], None] | None = None,
) -> PassageVectors | None:
    """The document's passage vectors of `embedder`, computing and storing the missing ones
    first (`on_embedding` is told how many passages, before); None when it has no passages.
    No transaction stays open while the embedder runs."""
    with sessions() as session:
        rows = documents.get_passages(session=session, document_id=document_id)
    return vectors_of_rows(sessions, document_id, rows, embedder, on_embedding=on_embedding)


def vectors_of_rows(
    sessions: sessionmaker[Session],
    document_id: int,
    rows: Sequence,
    embedder: Embedder,
    *,
    on_embedding: Callable[[int], None] | None = None,
) -> PassageVectors | None:
    """ensure_vectors for the document's passage rows as already read (all of them, in order):
    the missing vectors are computed and stored, and the rows are not read again."""
    vectors = from_rows(rows, embedder.name, embedder.dimension)
    if vectors is not None or not rows:
        return vectors
    missing = {
        r.ordinal: r.text for r in rows if from_rows([r], embedder.name, embedder.dimension) is None
    }
    if on_embedding is not None:
        on_embedding(len(missing))
    started = time.perf_counter()
    groups = embed_passages(embedder, list(missing.values()))
    stored = {o: to_bytes(g) for o, g in zip(missing, groups, strict=True)}
    with sessions() as session:
        documents.set_passage_embeddings(
            session=session, document_id=document_id, model=embedder.name, embeddings=stored
        )
        session.commit()
    logger.info(
        "embedded %d passages of document %s in %.1f s",
        len(missing),
        document_id,
        time.perf_counter() - started,
    )
    # As stored (float16), the same as reading the rows back would give.
    return from_rows(
        [_Stored(embedder.name, stored[r.ordinal]) if r.ordinal in stored else r for r in rows],
        embedder.name,
        embedder.dimension,
    )


@dataclass(frozen=True)
class _Stored:
    embedding_model: str
    embedding: bytes
