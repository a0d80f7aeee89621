"""The one sentence encoder of the packaged embedding models (app/embedding_models.py).

Both the worker's embedder (worker/model/embedder.py: transformers, batched, on the GPU when
there is one) and the search's query encoder (app/query_encoder.py: numpy, for processes without
torch) are a SentenceEncoder: the same tokenizer.json read the same way, the same windows of the
model's trained length with [CLS] and [SEP], the same mean pooling over every token of every
window into one unit-length float32 row per text. They differ only in what runs the model over
the windows (`_encode_windows`): app/ may not import torch (import-linter), and the worker must
embed a whole document's sentences in batches, so the forward pass exists twice and nothing else
does. The query encoder reads one window (`max_windows=1`); the worker reads a text whole.

EncoderPerProcess keeps one encoder per model for the life of a process, None when embeddings
are off or the model cannot be loaded, the reason logged once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from app.embedding_models import NO_EMBEDDING_MODEL, EmbedderUnavailableError, EmbeddingModelSpec

logger = logging.getLogger(__name__)


class SentenceEncoder:
    """A mean-pooled BERT-style encoder of a packaged model (module docstring); a subclass runs
    the model (`_encode_windows`) and defines `embed`."""

    def __init__(
        self,
        spec: EmbeddingModelSpec,
        folder: Path,
        *,
        dimension: int,
        batch_size: int = 32,
        max_windows: int | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if max_windows is not None and max_windows < 1:
            raise ValueError("max_windows must be at least 1")
        self.spec = spec
        self.batch_size = batch_size
        self.max_windows = max_windows
        self._dimension = dimension
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The packaged tokenizer.json pads and truncates to 128; we window and pad ourselves.
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._cls = self._special_id("[CLS]")
        self._sep = self._special_id("[SEP]")

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dimension(self) -> int:
        return self._dimension

    def _encode_windows(self, batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Per window (token ids with [CLS] and [SEP]), the sum of its token vectors ([B, D])
        and its number of tokens ([B])."""
        raise NotImplementedError

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length float32 row per text ([len(texts), dimension]); an empty text gets
        the embedding of the special tokens alone."""
        # windows: (text index, token ids with [CLS] and [SEP]) for every window of every text
        windows = self._windows(texts)
        # sums: [N, D] token vectors summed over all windows; counts: [N] tokens summed
        sums = np.zeros((len(texts), self._dimension), dtype=np.float64)
        counts = np.zeros(len(texts), dtype=np.float64)
        # Longest first: each batch holds windows of similar length, so little padding.
        order = sorted(range(len(windows)), key=lambda i: -len(windows[i][1]))
        for first in range(0, len(order), self.batch_size):
            batch = [windows[i] for i in order[first : first + self.batch_size]]
            token_sums, token_counts = self._encode_windows([ids for _, ids in batch])
            for (text_index, _), row, count in zip(batch, token_sums, token_counts, strict=True):
                sums[text_index] += row
                counts[text_index] += count
        means = sums / np.maximum(counts, 1.0)[:, None]
        norms = np.linalg.norm(means, axis=1, keepdims=True)
        return (means / np.maximum(norms, 1e-12)).astype(np.float32)

    def _special_id(self, token: str) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise EmbedderUnavailableError(
                f"The tokenizer of {self.spec.name} has no {token} token; it is not a BERT-style "
                "model this embedder can run."
            )
        return token_id

    def _windows(self, texts: Sequence[str]) -> list[tuple[int, list[int]]]:
        span = self.spec.max_tokens - 2  # room for [CLS] and [SEP]
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        windows = []
        for index, encoding in enumerate(encodings):
            ids = encoding.ids
            starts = range(0, max(len(ids), 1), span)
            if self.max_windows is not None:
                starts = starts[: self.max_windows]
            for start in starts:
                windows.append((index, [self._cls, *ids[start : start + span], self._sep]))
        return windows


Encoder = TypeVar("Encoder")


class EncoderPerProcess(Generic[Encoder]):
    """One encoder per model for the life of the process, loaded on first use by `load` (which
    raises EmbedderUnavailableError); None when the model is "none" or cannot be loaded, the
    reason logged once after `fallback` (what ranks without it)."""

    def __init__(self, load: Callable[[str], Encoder], *, fallback: str) -> None:
        self._load = load
        self._fallback = fallback
        self._lock = threading.Lock()
        self._loaded: dict[str, Encoder | None] = {}

    def get(self, model: str) -> Encoder | None:
        with self._lock:
            if model not in self._loaded:
                self._loaded[model] = self._load_or_none(model)
            return self._loaded[model]

    def reset(self) -> None:
        with self._lock:
            self._loaded.clear()

    def _load_or_none(self, model: str) -> Encoder | None:
        if model in ("", NO_EMBEDDING_MODEL):
            return None
        try:
            return self._load(model)
        except EmbedderUnavailableError as error:
            logger.warning("%s: %s", self._fallback, error.message)
            return None
