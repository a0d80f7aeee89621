"""Split parsed pages into passages that fit the model: paragraphs, then sentences, then tokens.

Passages are packed greedily from whole sentences. When a passage is full it ends at the last
paragraph end inside it, unless that would leave it less than half full, and otherwise at the last
sentence end. Only a sentence that alone exceeds the budget is cut, at line breaks, then words,
then characters, by langchain's RecursiveCharacterTextSplitter. Token counts come from the model's
tokenizer in a few batched calls, and every passage's final count is measured, never estimated.

A long document is split window by window (WINDOW_CHARS, each window ending at a paragraph break
where there is one), so the working memory of splitting (sentences, their counts, the packing)
is bounded by a window whatever the document's length; only the passages themselves grow with
it. A passage never spans two windows, which matters only for documents past 2 * WINDOW_CHARS
characters (some 150 pages): there, one passage in a few hundred ends at a paragraph break a
little earlier than it would otherwise.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pipelines.documents import PAGE_SEPARATOR, PageText, Passage, document_text, page_spans
from pipelines.ingest.long_sentences import cut_long_sentences
from pipelines.ingest.sentences import split_sentences
from pipelines.protocols import TokenCounter

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
# A page whose text ends like this ends its sentence; any other ending continues onto the next page.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*\s*\Z")
# Same length as PAGE_SEPARATOR, so offsets into the view are offsets into the document text.
_CONTINUATION = " \n"
# A full passage may end at a paragraph end only if that keeps it at least this full.
_MIN_FILL_AT_PARAGRAPH_END = 0.5
# Characters of the document text split at once; a text up to twice this is one window.
WINDOW_CHARS = 250_000


@dataclass(frozen=True, slots=True)
class _Unit:
    """A sentence, or a piece of one too long for a passage."""

    start: int
    end: int
    num_tokens: int
    ends_paragraph: bool
    is_piece: bool


def split_into_passages(
    pages: Sequence[PageText],
    *,
    count_tokens: TokenCounter,
    max_tokens: int = 384,
    overlap_sentences: int = 0,
) -> list[Passage]:
    """Passages of at most `max_tokens` tokens covering all the text of `pages`, in order.

    Each passage is `document_text(pages)[start_char:end_char]`, without surrounding whitespace.
    With `overlap_sentences` = k > 0 a passage repeats up to the last k whole sentences of the one
    before it, as far as they fit. The one passage that can exceed `max_tokens` is a single
    character that alone counts more (possible only with a budget of a few tokens).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if overlap_sentences < 0:
        raise ValueError(f"overlap_sentences must be at least 0, got {overlap_sentences}")
    pages = tuple(pages)
    text = document_text(pages)
    view = _continuation_view(pages)
    starts = [start for _, start, _ in page_spans(pages)]
    numbers = [page.number for page in pages]
    passages: list[Passage] = []
    for lo, hi in _windows(view, WINDOW_CHARS):
        spans = _split_window(text, view, lo, hi, count_tokens, max_tokens, overlap_sentences)
        for start, end, num_tokens in spans:
            passages.append(
                Passage(
                    ordinal=len(passages),
                    first_page=numbers[bisect.bisect_right(starts, start) - 1],
                    last_page=numbers[bisect.bisect_right(starts, end - 1) - 1],
                    start_char=start,
                    end_char=end,
                    text=text[start:end],
                    num_tokens=num_tokens,
                )
            )
    return passages


def _windows(view: str, size: int) -> Iterator[tuple[int, int]]:
    """[lo, hi) ranges covering `view`, each at least `size` long but the last, at most 2 * size.

    A window ends at the first blank line past `size` (sentences never cross one, so splitting
    there changes no sentence), else at the last line break, else the last space, else anywhere.
    """
    lo = 0
    while len(view) - lo > 2 * size:
        limit = lo + 2 * size
        blank = _BLANK_LINE.search(view, lo + size, limit)
        if blank is not None:
            hi = blank.start()
        else:
            hi = max(view.rfind("\n", lo + size, limit), view.rfind(" ", lo + size, limit))
            hi = hi if hi > lo else limit
        yield lo, hi
        lo = hi
    yield lo, len(view)


def _split_window(
    text: str,
    view: str,
    lo: int,
    hi: int,
    count_tokens: TokenCounter,
    max_tokens: int,
    overlap_sentences: int,
) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of the passages of text[lo:hi], offsets into the whole text."""
    units = _units(text, view, lo, hi, count_tokens, max_tokens)
    if not units:
        return []
    sizes = _Sizes(units, _gap_tokens(text, units, count_tokens))
    ranges = _pack(sizes, 0, len(units) - 1, max_tokens, overlap_sentences)
    ranges, counts = _enforce_budget(text, sizes, ranges, count_tokens, max_tokens)
    return [
        (units[first].start, units[last].end, num_tokens)
        for (first, last), num_tokens in zip(ranges, counts, strict=True)
    ]


def _continuation_view(pages: Sequence[PageText]) -> str:
    """The document text with page breaks that fall inside a sentence turned into line breaks.

    Contracts often carry a sentence over a page break; the view lets the segmenter see one sentence
    there while every offset stays valid for the real document text.
    """
    parts: list[str] = []
    for index, page in enumerate(pages):
        if index:
            before, after = pages[index - 1].text, page.text
            continues = before.strip() and after.strip() and not _SENTENCE_END.search(before)
            parts.append(_CONTINUATION if continues else PAGE_SEPARATOR)
        parts.append(page.text)
    return "".join(parts)


def _units(
    text: str, view: str, lo: int, hi: int, count_tokens: TokenCounter, max_tokens: int
) -> list[_Unit]:
    """The sentences of view[lo:hi] (pieces of those over budget), offsets into the whole text."""
    spans = [(lo + start, lo + end) for start, end in split_sentences(view[lo:hi])]
    counts = count_tokens([text[start:end] for start, end in spans]) if spans else []
    too_long = [span for span, count in zip(spans, counts, strict=True) if count > max_tokens]
    pieces = iter(cut_long_sentences(text, too_long, count_tokens, max_tokens))
    units = []
    for index, ((start, end), num_tokens) in enumerate(zip(spans, counts, strict=True)):
        is_last = index + 1 == len(spans)
        ends_paragraph = is_last or bool(_BLANK_LINE.search(view, end, spans[index + 1][0]))
        if num_tokens <= max_tokens:
            units.append(_Unit(start, end, num_tokens, ends_paragraph, is_piece=False))
            continue
        cut = next(pieces)
        for number, (piece_start, piece_end, piece_tokens) in enumerate(cut, start=1):
            is_final = ends_paragraph and number == len(cut)
            units.append(_Unit(piece_start, piece_end, piece_tokens, is_final, is_piece=True))
    return units


def _gap_tokens(text: str, units: list[_Unit], count_tokens: TokenCounter) -> list[int]:
    """Estimated tokens the whitespace between unit i and i + 1 adds when both sit in one passage.

    Measured as count("a" + gap + "a") - 2 * count("a") once per distinct gap: a space usually
    merges into the next word's token (0), a blank line usually costs a token of its own.
    """
    gaps = [text[left.end : right.start] for left, right in itertools.pairwise(units)]
    distinct = sorted(set(gaps))
    if not distinct:
        return []
    counts = count_tokens(["a", *(f"a{gap}a" for gap in distinct)])
    cost = {gap: max(0, n - 2 * counts[0]) for gap, n in zip(distinct, counts[1:], strict=True)}
    return [cost[gap] for gap in gaps]


class _Sizes:
    """Estimated tokens of any run of units, from prefix sums."""

    def __init__(self, units: Sequence[_Unit], gap_tokens: Sequence[int]) -> None:
        self.units = units
        self._gap_tokens = gap_tokens
        # _cumulative[i]: units 0..i-1 with the gaps between them.
        self._cumulative = [0]
        for index, unit in enumerate(units):
            gap = gap_tokens[index - 1] if index else 0
            self._cumulative.append(self._cumulative[-1] + gap + unit.num_tokens)

    def __call__(self, first: int, last: int) -> int:
        gap_before_first = self._gap_tokens[first - 1] if first else 0
        return self._cumulative[last + 1] - self._cumulative[first] - gap_before_first


def _pack(sizes: _Sizes, lo: int, hi: int, budget: int, overlap: int) -> list[tuple[int, int]]:
    """Inclusive ranges of units lo..hi, each a passage whose estimated size fits `budget`."""
    units = sizes.units
    ranges = []
    first = lo
    while first <= hi:
        last = first
        while last < hi and sizes(first, last + 1) <= budget:
            last += 1
        if last < hi and not units[last].ends_paragraph:
            for candidate in range(last - 1, first - 1, -1):
                if sizes(first, candidate) < budget * _MIN_FILL_AT_PARAGRAPH_END:
                    break
                if units[candidate].ends_paragraph:
                    last = candidate
                    break
        ranges.append((first, last))
        following = last + 1
        if following > hi:
            break
        # Repeat up to `overlap` whole sentences of this passage, as many as fit with the next one.
        next_first = following
        for repeated in range(min(overlap, last - first), 0, -1):
            start = following - repeated
            is_whole = not any(unit.is_piece for unit in units[start : following + 1])
            if is_whole and sizes(start, following) <= budget:
                next_first = start
                break
        first = next_first
    return ranges


def _enforce_budget(
    text: str,
    sizes: _Sizes,
    ranges: list[tuple[int, int]],
    count_tokens: TokenCounter,
    max_tokens: int,
) -> tuple[list[tuple[int, int]], list[int]]:
    """Measure every passage; re-pack the few whose real count exceeds max_tokens.

    Tokens can merge or split across a sentence boundary unlike the per-sentence counts suggest.
    An over-long range of two or more units is re-packed with a budget below its estimate, or
    halved, so it splits; every round shrinks it, so this ends. A single unit was measured alone
    and fits, unless it is one character that alone exceeds the budget, which nothing can cut.
    """
    units = sizes.units

    def measure(spans: list[tuple[int, int]]) -> list[int]:
        return count_tokens([text[units[first].start : units[last].end] for first, last in spans])

    counts = measure(ranges)

    def is_over(span: tuple[int, int], count: int) -> bool:
        return count > max_tokens and span[0] < span[1]

    while any(map(is_over, ranges, counts)):
        next_ranges: list[tuple[int, int]] = []
        for index, ((first, last), count) in enumerate(zip(ranges, counts, strict=True)):
            if not is_over((first, last), count):
                next_ranges.append((first, last))
                continue
            overshoot = count - max_tokens
            budget = max(1, min(sizes(first, last) - 1, max_tokens - overshoot))
            repacked = _pack(sizes, first, last, budget, overlap=0)
            if len(repacked) == 1:
                # The estimates are far off (units that count 0 alone): halve instead.
                middle = (first + last) // 2
                repacked = [(first, middle), (middle + 1, last)]
            # With overlap the next passage may already hold the tail of this one.
            next_first = ranges[index + 1][0] if index + 1 < len(ranges) else len(units)
            next_ranges.extend(span for span in repacked if span[0] < next_first)
        # Re-measuring the unchanged ranges too keeps this simple; the loop rarely runs twice.
        ranges, counts = next_ranges, measure(next_ranges)
    return ranges, counts
