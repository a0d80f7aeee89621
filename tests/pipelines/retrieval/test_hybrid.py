"""Fusion arithmetic and the BM25 fallback of the hybrid ranker (the real model: tests/worker)."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.documents import PageText, Passage
from pipelines.inputs import DocumentInput
from pipelines.retrieval.bm25 import PassageIndex
from pipelines.retrieval.hybrid import Fusion, HybridIndex, fuse, index_for
from pipelines.vectors import PassageVectors, passage_segments

TEXTS = [
    "The supplier delivers the goods to the warehouse every month.",
    "This Agreement is governed by the laws of the State of Ohio.",
    "Invoices are payable within thirty days of receipt.",
]


def _passages() -> list[Passage]:
    passages, offset = [], 0
    for ordinal, text in enumerate(TEXTS):
        passages.append(Passage(ordinal, 1, 1, offset, offset + len(text), text, len(text.split())))
        offset += len(text) + 1
    return passages


class FixedEmbedder:
    """Gives every query the same vector: the test chooses what "dense" prefers."""

    name = "fixed"
    dimension = 3

    def __init__(self, vector: list[float]) -> None:
        self.vector = np.asarray(vector, dtype=np.float32)
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return np.tile(self.vector, (len(texts), 1))


def test_rrf_sums_reciprocal_ranks_and_skips_passages_without_a_bm25_match() -> None:
    bm25 = np.array([0.0, 2.0, 1.0])
    dense = np.array([0.9, 0.1, 0.5])
    fused = fuse(bm25, dense, Fusion("rrf", 0.5, rrf_k=60))
    expected = [
        0.5 * (1 / 61),  # no BM25 match: dense rank 1 only
        0.5 * (1 / 61) + 0.5 * (1 / 63),
        0.5 * (1 / 62) + 0.5 * (1 / 62),
    ]
    np.testing.assert_allclose(fused, expected)


def test_blend_normalises_both_scores() -> None:
    fused = fuse(np.array([0.0, 4.0, 2.0]), np.array([0.2, 0.6, 1.0]), Fusion("blend", 0.25))
    np.testing.assert_allclose(fused, [0.0, 0.75 + 0.25 * 0.5, 0.75 * 0.5 + 0.25])


def test_fusion_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="method"):
        Fusion("max")
    with pytest.raises(ValueError, match="dense_weight"):
        Fusion("rrf", 1.5)
    with pytest.raises(ValueError, match="shapes"):
        fuse(np.zeros(2), np.zeros(3))


def test_dense_side_lifts_a_passage_bm25_cannot_see() -> None:
    # Passage 1 ("governed by the laws") shares no word with the query; its vector matches.
    vectors = np.eye(3, dtype=np.float32)
    embedder = FixedEmbedder([0.0, 1.0, 0.0])
    index = HybridIndex(_passages(), vectors, embedder)
    query = "Which jurisdiction applies to disputes about invoices?"
    assert PassageIndex(_passages()).rank(query, 1)[0][0].ordinal == 2
    ranked = index.rank(query, 2)
    assert {passage.ordinal for passage, _ in ranked} == {1, 2}
    assert index.is_hybrid
    index.rank(query, 2)
    assert embedder.calls == 1  # the query vector is kept


def test_without_vectors_or_embedder_it_is_bm25_alone() -> None:
    query = "When are invoices payable?"
    bm25 = PassageIndex(_passages()).rank(query)
    no_vectors = HybridIndex(_passages(), None, FixedEmbedder([1.0, 0.0, 0.0]))
    no_embedder = HybridIndex(_passages(), np.eye(3, dtype=np.float32), None)
    for index in (no_vectors, no_embedder):
        assert not index.is_hybrid
        assert index.rank(query) == bm25


def test_index_for_uses_the_documents_vectors_when_it_has_them() -> None:
    pages = (PageText(1, "\n".join(TEXTS)),)
    plain = DocumentInput("t", "legal", pages, tuple(_passages()))
    embedded = DocumentInput("t", "legal", pages, tuple(_passages()), np.eye(3))
    embedder = FixedEmbedder([0.0, 1.0, 0.0])
    assert type(index_for(plain, embedder)) is PassageIndex
    assert type(index_for(embedded, None)) is PassageIndex
    assert isinstance(index_for(embedded, embedder), HybridIndex)
    assert embedded == plain  # vectors are left out of equality
    with pytest.raises(ValueError, match="passage_embeddings"):
        DocumentInput("t", "legal", pages, tuple(_passages()), np.eye(2))
    with pytest.raises(ValueError, match="vectors cover 2 passages"):
        HybridIndex(_passages(), np.eye(2, dtype=np.float32), embedder)


def test_a_passage_scores_its_best_sentence() -> None:
    vectors = PassageVectors.from_groups(
        [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.6, 0.8]]), np.array([[-1.0, 0.0]])]
    )
    assert vectors.num_passages == 3 and vectors.dimension == 2
    np.testing.assert_allclose(vectors.scores(np.array([0.0, 1.0])), [1.0, 0.8, 0.0])
    np.testing.assert_allclose(vectors.group(1), [[0.6, 0.8]])
    with pytest.raises(ValueError, match="at least one row"):
        PassageVectors(np.zeros((2, 2)), np.array([0, 0, 2]))


def test_segments_are_the_passages_sentences_with_words() -> None:
    text = "1. Term. This Agreement runs for two years. -- \n\nIt renews each year."
    segments = passage_segments(text)
    assert all(segment in text for segment in segments)
    assert any("two years" in segment for segment in segments)
    assert any("renews" in segment for segment in segments)
    assert passage_segments("-- --") == ["-- --"]  # never no vector at all
