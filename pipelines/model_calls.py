"""Calls to a ChatModel on behalf of one pipeline run: the fit test and the stats they add up to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.protocols import ChatModel, ProgressCallback

# Per-call stats that add up over the calls of one summary or answer.
_SUMMED = (
    "num_prompt_tokens",
    "num_cached_tokens",
    "prefill_seconds",
    "num_decode_tokens",
    "decode_seconds",
)


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
    ) -> str:
        """The model's text for `messages`; `step` names the call in the stats ("section", ...)."""
        completion = self.model.complete(
            messages, max_new_tokens=max_new_tokens, on_progress=on_progress
        )
        call = dict(completion.stats or {})
        call["step"] = step
        self.calls.append(call)
        return completion.text

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
        total["calls"] = [dict(call) for call in self.calls]
        return total
