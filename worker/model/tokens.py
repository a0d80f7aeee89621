"""Token counting with the model's own tokenizer, without loading the model.

Counting is bounded in memory whatever it is given: the Rust tokenizer keeps a full Encoding
(ids, offsets, token strings: some 600 bytes a token) for every text of a batch until the batch
returns, so texts go to it in batches of at most MAX_BATCH_CHARS characters, and a text longer
than MAX_PIECE_CHARS is counted in pieces cut just before a space (where the byte-level
pre-tokenizer splits anyway, so the sum is the count of the whole; a piece without any space is
cut where it must, which can miscount by a token per cut). Peak memory of a count is then some
tens of MB, not gigabytes for a long document (bench/results/text_bombs.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer

from engine.gguf_convert import ensure_tokenizer

MAX_BATCH_CHARS = 256 * 1024
MAX_PIECE_CHARS = 64 * 1024


class TokenizerCounter:
    """A `pipelines.protocols.TokenCounter` over a tokenizer.json (Rust tokenizers, batched)."""

    def __init__(self, tokenizer_json: Path) -> None:
        self._tokenizer = Tokenizer.from_file(str(tokenizer_json))

    def __call__(self, texts: Sequence[str], /) -> list[int]:
        counts = [0] * len(texts)
        for owners, batch in _batches(texts):
            encodings = self._tokenizer.encode_batch(batch, add_special_tokens=False)
            for owner, encoding in zip(owners, encodings, strict=True):
                counts[owner] += len(encoding.ids)
        return counts


def _batches(texts: Sequence[str]) -> Iterator[tuple[list[int], list[str]]]:
    """(index of the text each piece belongs to, pieces), at most MAX_BATCH_CHARS a batch."""
    owners: list[int] = []
    batch: list[str] = []
    size = 0
    for index, text in enumerate(texts):
        for piece in _pieces(text):
            if batch and size + len(piece) > MAX_BATCH_CHARS:
                yield owners, batch
                owners, batch, size = [], [], 0
            owners.append(index)
            batch.append(piece)
            size += len(piece)
    if batch:
        yield owners, batch


def _pieces(text: str) -> Iterator[str]:
    start = 0
    while len(text) - start > MAX_PIECE_CHARS:
        limit = start + MAX_PIECE_CHARS
        # Before a space that follows a non-space: the pre-tokenizer splits there too. No such
        # place in the second half of the window: cut at its end.
        floor = start + MAX_PIECE_CHARS // 2
        cut = text.rfind(" ", floor, limit)
        while cut > floor and text[cut - 1].isspace():
            cut = text.rfind(" ", floor, cut - 1)
        if cut <= floor:
            cut = limit
        yield text[start:cut]
        start = cut
    yield text[start:]


def token_counter_for(model_path: Path, cache_dir: Path) -> TokenizerCounter:
    """The counter of the model at model_path (a .gguf is converted once, tokenizer only)."""
    folder = ensure_tokenizer(model_path, cache_dir)
    return TokenizerCounter(folder / "tokenizer.json")
