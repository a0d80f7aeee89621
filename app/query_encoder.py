"""The search query's embedding, computed where the search runs (the UI, the CLI), without torch.

The passages were embedded by the worker (worker/model/embedder.py: transformers). A search must not
wait on a worker round trip for one short text, and app/ imports no torch, so the same packaged
checkpoint (app/embedding_models.py) runs here in numpy: a 6-layer, 384-wide BERT encoder, read
straight from its safetensors file. Tokenising, windows and pooling are the worker's own
(app/sentence_encoder.py): only the forward pass is numpy here. A query is embedded in one window of the trained length (256 tokens):
a longer one is truncated there (the worker embeds a long passage window by window). A query
of a few words takes a few milliseconds on a CPU; the vectors agree with the worker's to ~1e-6
in cosine (tests/app/test_query_encoder.py).
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.embedding_models import (
    EmbedderUnavailableError,
    EmbeddingModelSpec,
    package_folder,
    query_window_end,
    spec_for,
)
from app.sentence_encoder import EncoderPerProcess, SentenceEncoder

MAX_REMEMBERED = 128  # recent queries' vectors kept
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file (an 8-byte header length, a JSON header, the bytes)."""
    data = path.read_bytes()
    (header_length,) = np.frombuffer(data[:8], dtype="<u8")
    header = json.loads(data[8 : 8 + int(header_length)])
    body = memoryview(data)[8 + int(header_length) :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise EmbedderUnavailableError(f"{path.name}: unsupported dtype {entry['dtype']}")
        start, end = entry["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=np.dtype(dtype).newbyteorder("<"))
        tensors[name] = array.reshape(entry["shape"])
    return tensors


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and BERT's GELU is
    # the exact one, not the tanh approximation.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


class QueryEncoder(SentenceEncoder):
    """A BERT-style sentence encoder in numpy, for a few short texts at a time, each embedded in
    one window. The weights are read on the first `embed`, so a search whose candidates have no
    vectors never reads them."""

    def __init__(
        self, spec: EmbeddingModelSpec, folder: Path, *, remember: int = MAX_REMEMBERED
    ) -> None:
        config = json.loads((folder / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise EmbedderUnavailableError(f"{spec.name} is not a BERT encoder this can run.")
        # One window: a query longer than the model's trained length is embedded truncated.
        super().__init__(spec, folder, dimension=int(config["hidden_size"]), max_windows=1)
        self._num_heads = int(config["num_attention_heads"])
        self._num_layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._weights_path = folder / "model.safetensors"
        self._w: dict[str, np.ndarray] | None = None  # read on first use (90 MB)
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._remember = remember

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        """One unit-length float32 row per text ([len(texts), dimension]). The last few texts'
        rows are kept: the UI runs its page again on every click, with the same query."""
        rows = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for index, text in enumerate(texts):
            with self._lock:
                known = self._recent.get(text)
                if known is not None:
                    self._recent.move_to_end(text)
            if known is None:
                known = self._embed_one(text)
                with self._lock:
                    self._recent[text] = known
                    while len(self._recent) > self._remember:
                        self._recent.popitem(last=False)
            rows[index] = known
        return rows

    def embedded_text(self, text: str) -> str:
        """The part of `text` that `embed` embeds: the first window of the model's trained
        length (app.embedding_models.query_window_end); all of it when it fits."""
        offsets = self._tokenizer.encode(text, add_special_tokens=False).offsets
        end = query_window_end(offsets, self.spec.max_tokens)
        return text if end is None else text[:end]

    def _embed_one(self, text: str) -> np.ndarray:
        return self._embed([text])[0]

    def _encode_windows(self, batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Per window, the sum of its token vectors and its number of tokens, one at a time."""
        # token_sums: [B, D]
        token_sums = np.stack(
            [self._encode(np.asarray(ids)).sum(axis=0, dtype=np.float64) for ids in batch]
        )
        return token_sums, np.array([len(ids) for ids in batch], dtype=np.float64)

    def _weights(self) -> dict[str, np.ndarray]:
        with self._lock:
            if self._w is None:
                weights = {}
                for stored_name, value in read_safetensors(self._weights_path).items():
                    if value.dtype == np.int64:  # position ids
                        continue
                    name = stored_name.removeprefix("bert.")
                    # Linear weights transposed once: x @ w, x: [T, in], w: [in, out].
                    is_linear = value.ndim == 2 and not name.startswith("embeddings.")
                    weights[name] = np.ascontiguousarray(
                        value.T if is_linear else value, np.float32
                    )
                self._w = weights
            return self._w

    def _encode(self, ids: np.ndarray) -> np.ndarray:
        w = self._weights()
        length = len(ids)
        # x: [T, D]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps
        )
        head_size = self._dimension // self._num_heads
        for layer in range(self._num_layers):
            p = f"encoder.layer.{layer}."

            def linear(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return h @ w[f"{p}{name}.weight"] + w[f"{p}{name}.bias"]

            # q, k, v: [H, T, d]
            q, k, v = (
                linear(x, f"attention.self.{name}")
                .reshape(length, self._num_heads, head_size)
                .transpose(1, 0, 2)
                for name in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_size)  # [H, T, T]
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(length, self._dimension)  # [T, D]
            x = _layer_norm(
                x + linear(context, "attention.output.dense"),
                w[f"{p}attention.output.LayerNorm.weight"],
                w[f"{p}attention.output.LayerNorm.bias"],
                self._eps,
            )
            inner = _gelu(linear(x, "intermediate.dense"))  # [T, 4D]
            x = _layer_norm(
                x + linear(inner, "output.dense"),
                w[f"{p}output.LayerNorm.weight"],
                w[f"{p}output.LayerNorm.bias"],
                self._eps,
            )
        return x


def _load(model: str) -> QueryEncoder:
    spec = spec_for(model)
    try:
        return QueryEncoder(spec, package_folder(spec))
    except (OSError, ImportError) as error:
        raise EmbedderUnavailableError(str(error)) from error


_encoders = EncoderPerProcess(_load, fallback="search ranks by words alone")


def query_encoder(model: str) -> QueryEncoder | None:
    """The encoder of the `embedding_model` setting, loaded once per process; None when
    embeddings are off or the model is not installed (search then ranks by words alone)."""
    return _encoders.get(model)
