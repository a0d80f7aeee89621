"""The packaged sentence-embedding model, for real: offline, unit vectors, meaning over words."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from worker.model.embedder import (
    MODELS,
    EmbedderUnavailableError,
    EmbeddingModelSpec,
    SharedEmbedder,
    TransformerEmbedder,
    load_embedder,
    package_folder,
)

pytestmark = pytest.mark.slow


def test_loads_from_the_package_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    loaded = load_embedder(device="cpu")
    assert loaded.name == "all-MiniLM-L6-v2"
    assert loaded.dimension == 384
    assert package_folder(MODELS["all-minilm-l6-v2"]).is_dir()


def test_unit_vectors_and_similar_sentences_closer(embedder: TransformerEmbedder) -> None:
    vectors = embedder.embed(
        [
            "This Agreement shall be governed by the laws of the State of Ohio.",
            "Ohio law applies to this contract.",
            "The patient received amoxicillin 500 mg three times daily.",
            "",
        ]
    )
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    law, paraphrase, unrelated = vectors[0], vectors[1], vectors[2]
    assert law @ paraphrase > 0.5
    assert law @ paraphrase > law @ unrelated + 0.3


def test_a_text_longer_than_the_model_is_read_whole(embedder: TransformerEmbedder) -> None:
    filler = "The parties shall meet each quarter to review the schedule of deliveries. " * 40
    tail = "Either party may terminate this agreement for convenience on ninety days notice."
    whole, head_only, about_tail = embedder.embed([filler + tail, filler, tail])
    # Over 256 word pieces: a truncating embedder would give the same vector for both.
    assert whole @ about_tail > head_only @ about_tail + 0.01


def test_batching_does_not_change_a_vector(embedder: TransformerEmbedder) -> None:
    texts = [f"Clause {i}: payment is due within {i} days of the invoice." for i in range(5)]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([text])[0] for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_a_missing_package_says_how_to_install_it() -> None:
    spec = EmbeddingModelSpec(
        name="nothing",
        package="no_such_embedding_package",
        subfolder="model",
        max_tokens=128,
        install="pip install no-such-embedding-package",
    )
    with pytest.raises(EmbedderUnavailableError, match="pip install no-such-embedding-package"):
        package_folder(spec)
    with pytest.raises(EmbedderUnavailableError, match="must be one of"):
        load_embedder("no-such-model")


def test_shared_embedder_is_loaded_once_and_none_when_off() -> None:
    shared = SharedEmbedder()
    assert shared.get("none") is None
    assert shared.get("no-such-model") is None  # logged; retrieval falls back to BM25
    first = shared.get("all-minilm-l6-v2")
    assert first is not None and shared.get("all-minilm-l6-v2") is first
