"""Calls to a ChatModel on behalf of one pipeline run: the fit test and the stats they add up to."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pipelines.protocols import ChatModel, ProgressCallback, TokenProgressCallback

# Per-call stats that add up over the calls of one summary or answer.
_SUMMED = (
    "num_prompt_tokens",
    "num_cached_tokens",
    "prefill_seconds",
    "num_decode_tokens",
    "decode_seconds",
    "num_repeated_sentences_dropped",
)
# A sentence this long that repeats an earlier one of the same output is a decoding loop, not
# content. Shorter ones may rightly repeat ("Not stated." under two headings).
MIN_REPEATED_SENTENCE_CHARS = 40
# A sentence with the page citations that follow it ("... 30 days. [p. 4]"), or a line's rest.
_SENTENCE = re.compile(r"\S.*?(?:[.!?](?:\s*\[p\.[^\]]*\])*(?=\s|$)|$)")
_CITATION = re.compile(r"\[p\.[^\]]*\]")


def drop_repeated_sentences(text: str) -> tuple[str, int]:
    """`text` without the sentences of MIN_REPEATED_SENTENCE_CHARS or more that repeat an
    earlier one (compared without case, extra spaces and page citations), and how many were
    dropped. Small models caught in a greedy-decoding loop write one sentence over and over
    until max_new_tokens. Lines are kept as lines; one left empty by the filter goes."""
    seen: set[str] = set()
    dropped = 0
    lines: list[str] = []
    for line in text.split("\n"):
        sentences = _SENTENCE.findall(line)
        kept: list[str] = []
        for sentence in sentences:
            key = " ".join(_CITATION.sub(" ", sentence).split()).casefold()
            if len(key) >= MIN_REPEATED_SENTENCE_CHARS:
                if key in seen:
                    continue
                seen.add(key)
            kept.append(sentence)
        dropped += len(sentences) - len(kept)
        if len(kept) == len(sentences):
            lines.append(line)  # untouched, spacing and all
        elif kept:
            lines.append(" ".join(kept))
    return "\n".join(lines), dropped


def fits(model: ChatModel, messages: Sequence[dict[str, str]], max_new_tokens: int) -> bool:
    """Whether the prompt and `max_new_tokens` of output fit the model's context window."""
    return model.count_chat_tokens(messages) + max_new_tokens <= model.max_context_tokens


class CallLog:
    """Runs the model and keeps each call's stats; `stats()` is what a result stores."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.calls: list[dict[str, Any]] = []

    def run(
        self,
        step: str,
        messages: Sequence[dict[str, str]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
    ) -> str:
        """The model's text for `messages`; `step` names the call in the stats ("section", ...)."""
        (text,) = self.run_many(
            step, [messages], max_new_tokens=max_new_tokens, on_progress=on_progress,
            on_tokens=on_tokens,
        )  # fmt: skip
        return text

    def run_many(
        self,
        step: str | Sequence[str],
        conversations: Sequence[Sequence[dict[str, str]]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> list[str]:
        """The model's texts for independent prompts, run together where the model batches;
        `step` names every call, or each one. `response_schema`: see ChatModel; the texts are
        the replies as written (JSON where the model followed the schema), for the caller to
        parse."""
        if not conversations:
            return []
        # Passed only when asked for: a model of the calls that never ask may not know it.
        schema = {} if response_schema is None else {"response_schema": response_schema}
        many = getattr(self.model, "complete_many", None)
        if many is not None:
            completions = many(
                conversations, max_new_tokens=max_new_tokens, on_progress=on_progress,
                on_tokens=on_tokens, **schema,
            )  # fmt: skip
        else:  # a model without batching
            completions = [
                self.model.complete(
                    m,
                    max_new_tokens=max_new_tokens,
                    on_progress=on_progress,
                    on_tokens=on_tokens,
                    **schema,
                )
                for m in conversations
            ]
        steps = [step] * len(completions) if isinstance(step, str) else list(step)
        texts = []
        for completion, name in zip(completions, steps, strict=True):
            text, dropped = drop_repeated_sentences(completion.text)
            call = dict(completion.stats or {})
            call["step"] = name
            call["num_repeated_sentences_dropped"] = dropped
            self.calls.append(call)
            texts.append(text)
        return texts

    def stats(self) -> dict[str, Any]:
        """Totals over the calls (tokens, seconds, prefill chunks), the peak memory, every call."""
        total: dict[str, Any] = {"model": self.model.name, "num_calls": len(self.calls)}
        for key in _SUMMED:
            values = [call[key] for call in self.calls if isinstance(call.get(key), int | float)]
            total[key] = sum(values) if values else 0
        total["num_computed_prompt_tokens"] = (
            total["num_prompt_tokens"] - total["num_cached_tokens"]
        )
        total["num_chunks"] = sum(len(call.get("chunk_sizes") or ()) for call in self.calls)
        peaks = [c["peak_memory_bytes"] for c in self.calls if c.get("peak_memory_bytes")]
        total["peak_memory_bytes"] = max(peaks) if peaks else None
        total["fallbacks"] = [f for call in self.calls for f in call.get("fallbacks") or ()]
        total["finish_reasons"] = [call.get("finish_reason") for call in self.calls]
        # Texts the token limit cut short (the model would have written on): told, not hidden.
        total["num_cut_by_length"] = total["finish_reasons"].count("length")
        total["calls"] = [dict(call) for call in self.calls]
        return total
