"""Cutting a sentence that alone is longer than a passage's token budget.

langchain's RecursiveCharacterTextSplitter cuts at line breaks, then words, then characters;
offsets are recovered with add_start_index, and every piece's real token count is measured.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from langchain_text_splitters import RecursiveCharacterTextSplitter

from pipelines.protocols import TokenCounter


def cut_long_sentences(
    text: str, spans: list[tuple[int, int]], count_tokens: TokenCounter, max_tokens: int
) -> list[list[tuple[int, int, int]]]:
    """For each sentence span longer than `max_tokens`, its pieces as (start, end, tokens).

    RecursiveCharacterTextSplitter cuts at line breaks, then spaces, then between characters, and
    merges parts back up to its chunk size by the sum of their counts. The real count of a piece
    can differ from that sum, so every piece is measured (all sentences in one batch) and the few
    still over the budget are cut again with the chunk size lowered by their overshoot.
    """
    length = _CachedLength(count_tokens)
    pieces: list[list[tuple[int, int, int]]] = [[] for _ in spans]
    work = [(index, start, end, max_tokens) for index, (start, end) in enumerate(spans)]
    while work:
        length.prefetch([part for _, start, end, _ in work for part in _parts(text[start:end])])
        cuts = [
            (index, piece, chunk_size)
            for index, start, end, chunk_size in work
            for piece in _langchain_cut(text, start, end, length, chunk_size)
        ]
        counts = count_tokens([text[start:end] for _, (start, end), _ in cuts])
        work = []
        for (index, (start, end), chunk_size), num_tokens in zip(cuts, counts, strict=True):
            if num_tokens <= max_tokens or end - start == 1:
                # One character that alone exceeds the budget cannot be cut further.
                pieces[index].append((start, end, num_tokens))
            else:
                smaller = max(1, chunk_size - (num_tokens - max_tokens))
                work.append((index, start, end, smaller))
    return [sorted(cut) for cut in pieces]


def _parts(sentence: str) -> list[str]:
    """What the splitter will measure: lines, words with their leading space, characters."""
    lines = re.split(r"(?=\n)", sentence)
    return [*lines, *(word for line in lines for word in re.split(r"(?= )", line)), *set(sentence)]


def _langchain_cut(
    text: str, start: int, end: int, length: Callable[[str], int], chunk_size: int
) -> list[tuple[int, int]]:
    sentence = text[start:end]
    splitter = RecursiveCharacterTextSplitter(
        separators=["\n", " ", ""],
        chunk_size=chunk_size,
        chunk_overlap=0,
        length_function=length,
        add_start_index=True,
    )
    starts: list[int] = []
    for piece in splitter.create_documents([sentence]):
        offset = piece.metadata["start_index"]
        if offset < 0:
            # add_start_index searches after the previous piece's end, but parts counted 0 tokens
            # (whitespace) can be carried into the next piece too: search from its start instead.
            offset = sentence.find(piece.page_content, starts[-1] + 1 if starts else 0)
        if offset >= 0 and (not starts or offset > starts[-1]):
            starts.append(offset)
    if len(starts) <= 1 and end - start > 1:
        # Kept whole: its parts counted far less than it does. Halve it instead.
        starts = [0, (end - start) // 2]
    # Each piece runs to where the next begins, so no character is lost or repeated.
    bounds = [start + offset for offset in starts[1:]]
    spans = [tighten(text, a, b) for a, b in zip([start, *bounds], [*bounds, end], strict=True)]
    return [(a, b) for a, b in spans if a < b]


class _CachedLength:
    """A one-text length function for langchain over a batched counter."""

    def __init__(self, count_tokens: TokenCounter) -> None:
        self._count_tokens = count_tokens
        self._known: dict[str, int] = {}

    def prefetch(self, texts: Sequence[str]) -> None:
        missing = sorted({t for t in texts if t and t not in self._known})
        if missing:
            self._known.update(zip(missing, self._count_tokens(missing), strict=True))

    def __call__(self, text: str) -> int:
        if text not in self._known:
            self._known[text] = self._count_tokens([text])[0]
        return self._known[text]


def tighten(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
