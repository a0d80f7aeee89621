"""Text of a generation as it grows, a token at a time, and stop strings over that text.

Why: re-decoding every generated token at every step costs O(n) per token, O(n^2) per answer,
and a batch of 64 long summaries pays that 64 times per step. IncrementalDetokenizer uses
vLLM's prefix/read-offset method instead: it decodes only a short window of recent tokens
(the tokens already shown plus the new ones) and emits the part of the window's text that the
shown tokens did not produce, so decoders that treat the first token of a text differently
(SentencePiece's leading space) and characters split over several byte tokens come out as
a full decode would give them. StopStrings then withholds any text that might be the start of
a stop string, so a streamed delta never shows a stop string's characters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

_INCOMPLETE = "\ufffd"  # what a decoder shows for bytes of a character still to come


class IncrementalDetokenizer:
    """append(token_id) -> the new text; after finish(), text equals
    tokenizer.decode(token_ids, skip_special_tokens=True). One per request; stream the deltas
    and read .text at the end (it joins what was emitted).

    tokenizer: a Hugging Face tokenizer. Tokenizers whose decode cleans up spaces before
    punctuation (WordPiece models) may differ from the full decode where a clean-up spans two
    deltas; in transformers 5 no Llama-family (BPE) tokenizer does this.
    """

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        # The Rust tokenizer under transformers' wrapper: the wrapper's decode spends ~40 us a
        # call in Python argument conversion, ten times the decode itself.
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._fast_decode = backend.decode if backend is not None else None
        self._skipped_ids = _special_ids(tokenizer)
        self._has_byte_fallback = _has_byte_fallback(tokenizer)
        self.token_ids: list[int] = []
        # The window: ids (special ones left out, as decode leaves them out) from the first
        # token already shown; the first _num_shown of them produced _shown_text.
        self._window: list[int] = []
        self._num_shown = 0
        self._shown_text = ""
        self._pieces: list[str] = []

    @property
    def text(self) -> str:
        """The text emitted so far (deltas joined)."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def append(self, token_id: int) -> str:
        """The text this token completes; "" while a character's bytes are incomplete."""
        self.token_ids.append(token_id)
        if token_id in self._skipped_ids:
            return ""
        self._window.append(token_id)
        if self._has_byte_fallback and self._is_byte_token(token_id):
            # SentencePiece's byte fallback turns a whole run of byte tokens into U+FFFD when
            # the run is not valid UTF-8, so a run's text is known only once it has ended.
            return ""
        window_text = self._decode(self._window)
        if len(window_text) <= len(self._shown_text) or window_text.endswith(_INCOMPLETE):
            return ""
        delta = window_text[len(self._shown_text) :]
        # The tokens just emitted become the window's lead: they end on a whole character.
        self._window = self._window[self._num_shown :]
        self._num_shown = len(self._window)
        self._shown_text = self._decode(self._window)
        self._pieces.append(delta)
        return delta

    def finish(self) -> str:
        """Whatever is still held back (bytes that never completed a character)."""
        window_text = self._decode(self._window)
        delta = window_text[len(self._shown_text) :]
        self._window = self._window[self._num_shown :]
        self._num_shown = len(self._window)
        self._shown_text = self._decode(self._window)
        if delta:
            self._pieces.append(delta)
        return delta

    def decode(self, token_ids: list[int]) -> str:
        """The text of token_ids, as tokenizer.decode(..., skip_special_tokens=True) gives it."""
        return self._decode(list(token_ids))

    def _decode(self, token_ids: list[int]) -> str:
        if self._fast_decode is not None:
            return self._fast_decode(token_ids, skip_special_tokens=True)
        return self._tokenizer.decode(token_ids, skip_special_tokens=True)

    def _is_byte_token(self, token_id: int) -> bool:
        token = self._tokenizer.convert_ids_to_tokens(token_id)
        return isinstance(token, str) and len(token) == 6 and token.startswith("<0x")


class StopStrings:
    """feed(delta) -> the part of the text that can be shown. After each delta, if the text so
    far holds a stop string (several: the one that starts first), the text ends before it:
    the engine stops at the token that completes a stop string, as vLLM does.

    Cost per delta: a search of the delta plus the previous max(len(stop)) - 1 characters.
    """

    def __init__(self, stop_strings: Sequence[str]) -> None:
        self.stop_strings = tuple(stop_strings)
        self._max_len = max((len(s) for s in self.stop_strings), default=0)
        self._tail = ""  # the last max_len - 1 characters fed (what a stop could start in)
        self._held = ""  # fed but not shown: it may be the start of a stop string
        self._pieces: list[str] = []
        self.matched: str | None = None  # the stop string found, once found

    @property
    def is_stopped(self) -> bool:
        return self.matched is not None

    @property
    def text(self) -> str:
        """The text shown so far: after a stop, everything before the stop string."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def feed(self, delta: str) -> str:
        """The newly showable text; "" after a stop."""
        if self.is_stopped or not delta:
            return ""
        if not self.stop_strings:
            self._pieces.append(delta)
            return delta
        window = self._tail + delta
        held = self._held + delta
        hits = [(window.find(s), s) for s in self.stop_strings if s in window]
        if hits:
            start, self.matched = min(hits)
            # What was held covers the stop string's start, so the cut falls inside `held`.
            shown = held[: max(0, len(held) - (len(window) - start))]
            self._held = self._tail = ""
        else:
            keep = _longest_stop_prefix(window, self.stop_strings, len(held))
            shown, self._held = held[: len(held) - keep], held[len(held) - keep :]
            self._tail = window[max(0, len(window) - self._max_len + 1) :]
        if shown:
            self._pieces.append(shown)
        return shown

    def finish(self) -> str:
        """The held-back text, when the generation ended without a stop string."""
        shown, self._held = ("" if self.is_stopped else self._held), ""
        if shown:
            self._pieces.append(shown)
        return shown


def _longest_stop_prefix(text: str, stop_strings: tuple[str, ...], limit: int) -> int:
    """Length of the longest end of text (at most limit) that begins some stop string."""
    for length in range(min(limit, max(len(s) for s in stop_strings) - 1), 0, -1):
        end = text[len(text) - length :]
        if any(len(s) > length and s.startswith(end) for s in stop_strings):
            return length
    return 0


def _has_byte_fallback(tokenizer: Any) -> bool:
    """Whether the tokenizer's decoder has a ByteFallback step (tokens such as <0xE2>)."""
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if decoder is None:
        return False
    return "ByteFallback" in _decoder_types(json.loads(decoder.__getstate__()))


def _decoder_types(spec: Any) -> set[str]:
    if isinstance(spec, list):
        return set().union(*(_decoder_types(item) for item in spec))
    if not isinstance(spec, dict):
        return set()
    return {str(spec.get("type"))} | _decoder_types(spec.get("decoders", []))


def _special_ids(tokenizer: Any) -> frozenset[int]:
    """The ids decode(skip_special_tokens=True) drops: a fast tokenizer drops its added tokens
    marked special, a Python one its special tokens."""
    if hasattr(tokenizer, "backend_tokenizer"):
        return frozenset(
            int(i) for i, token in tokenizer.added_tokens_decoder.items() if token.special
        )
    return frozenset(int(i) for i in tokenizer.all_special_ids)
