"""Offline, deterministic sentence segmentation for legal and medical text.

nupunkt (a Punkt model trained on legal text, shipped inside the wheel) does the work; it scored
best on our hand-labelled set (bench/results/segmenters.md). This module adds a thin layer:
dosing and unit abbreviations the model lacks; abbreviations such as "e.g." or "v." that never end
a sentence even before a capital; re-joining a list marker such as "2." that Punkt leaves as a
sentence of its own when an inline numbered list follows a full stop; and blank lines as hard
boundaries.
"""

from __future__ import annotations

import functools
import re
import threading

from nupunkt import PunktSentenceTokenizer
from nupunkt.models import load_default_model

# Missing from nupunkt's model yet common in drug labels, clinical papers and contracts. Each was
# checked to fix a labelled case or to be one that almost never ends a sentence ("min." and "max."
# often do, so they are left out).
EXTRA_ABBREVIATIONS: tuple[str, ...] = (
    # Latin dosing schedules.
    "b.i.d",
    "t.i.d",
    "q.i.d",
    "q.o.d",
    "q.h",
    "q.h.s",
    "p.r.n",
    "s.q",
    # Durations and dosage forms.
    "yrs",
    "wk",
    "wks",
    "mos",
    "tab",
    "caps",
    "soln",
    "equiv",
    "tbl",
    "excl",
    # Legal references.
    "arts",
    "chap",
    "amend",
    "subparas",
)

# Abbreviations that introduce what follows and so never end a sentence, even before a capital:
# "e.g. Section 12.3", "Acme v. Beta", "Dr. Patel". Punkt may split there before a capital. ("No."
# is not one: "the answer is No." ends sentences in forms.)
_NEVER_FINAL_WORDS = (
    "e.g. i.e. cf. viz. v. vs. Dr. Mr. Mrs. Ms. Prof. Fig. Figs. Sec. Secs. Art. Arts."
)
NEVER_FINAL: frozenset[str] = frozenset([*_NEVER_FINAL_WORDS.split(), "Pat.", "Ex."])

# A "sentence" that is only a list marker: "2.", "(b)", "iv.", "a)".
_LIST_MARKER = re.compile(r"\(?(?:\d{1,3}|[a-zA-Z]|[ivxlcdm]{1,6}|[IVXLCDM]{1,6})[.)]")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")


_TOKENIZER_LOCK = threading.Lock()


@functools.cache
def _tokenizer() -> PunktSentenceTokenizer:
    # load_default_model() builds a fresh instance, so adding abbreviations here cannot leak into
    # other users of nupunkt's cached `load("default")`.
    tokenizer = load_default_model()
    tokenizer.add_abbreviations(list(EXTRA_ABBREVIATIONS))
    return tokenizer


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of `text`, in order.

    Spans never include the whitespace between sentences, never overlap, and together cover every
    non-whitespace character. A blank line always ends a sentence (parsed text marks paragraphs
    with one); a single line break does not (PDF text wraps lines mid-sentence).
    """
    spans: list[tuple[int, int]] = []
    tokenizer = _tokenizer()
    with _TOKENIZER_LOCK:  # one shared nupunkt model; the model worker's task threads share it
        found_all = [
            (start, list(tokenizer.spans(text[start:end], paragraph_breaks=False)))
            for start, end in _paragraphs(text)
        ]
    for start, found in found_all:
        # nupunkt would join a blank line followed by a lowercase word; our paragraphs are trusted.
        spans.extend((start + s, start + e) for s, e in found if s < e)
    return _cover(text, _join_list_markers(text, _join_never_final(text, spans)))


def _paragraphs(text: str) -> list[tuple[int, int]]:
    paragraphs = []
    start = 0
    for blank in _BLANK_LINE.finditer(text):
        if text[start : blank.start()].strip():
            paragraphs.append((start, blank.start()))
        start = blank.end()
    if text[start:].strip():
        paragraphs.append((start, len(text)))
    return paragraphs


def _join_never_final(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    joined: list[tuple[int, int]] = []
    for start, end in spans:
        if joined:
            previous_start, previous_end = joined[-1]
            last_word = text[previous_start:previous_end].rsplit(maxsplit=1)[-1].lstrip("([")
            if last_word in NEVER_FINAL and not _BLANK_LINE.search(text, previous_end, start):
                joined[-1] = (previous_start, end)
                continue
        joined.append((start, end))
    return joined


def _join_list_markers(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    joined: list[tuple[int, int]] = []
    pending_start: int | None = None
    for index, (start, end) in enumerate(spans):
        if pending_start is not None:
            start, pending_start = pending_start, None
        next_start = spans[index + 1][0] if index + 1 < len(spans) else None
        is_marker = _LIST_MARKER.fullmatch(text, start, end) is not None
        if is_marker and next_start is not None and not _BLANK_LINE.search(text, end, next_start):
            pending_start = start
            continue
        joined.append((start, end))
    return joined


def _cover(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Guarantee the contract whatever the model did: tight, ordered, nothing dropped."""
    covered: list[tuple[int, int]] = []
    cursor = 0
    for start, end in spans:
        start = max(start, cursor)
        if start >= end:
            continue
        gap = text[cursor:start]
        if gap.strip():
            # Text the model skipped joins the sentence before it, or starts this one.
            if covered:
                covered[-1] = (covered[-1][0], cursor + len(gap.rstrip()))
            else:
                start = cursor + len(gap) - len(gap.lstrip())
        covered.append(_tighten(text, start, end))
        cursor = end
    tail = text[cursor:]
    if tail.strip():
        covered.append(_tighten(text, cursor, len(text)))
    return covered


def _tighten(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
