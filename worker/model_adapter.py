"""The engine as the pipelines' ChatModel: chat messages in, text and stats out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import LLMEngine, SamplingParams
from pipelines.protocols import ProgressCallback


@dataclass(frozen=True)
class EngineCompletion:
    text: str
    stats: dict[str, Any] = field(default_factory=dict)


class EngineChatModel:
    """A `pipelines.protocols.ChatModel` over one LLMEngine (greedy decoding: faithful, repeatable)."""

    def __init__(self, engine: LLMEngine, name: str) -> None:
        self._engine = engine
        self._name = name

    @property
    def max_context_tokens(self) -> int:
        return int(self._engine.max_model_len)

    @property
    def name(self) -> str:
        return self._name

    def count_tokens(self, texts: Sequence[str], /) -> list[int]:
        return self._engine.count_tokens(list(texts))

    def count_chat_tokens(self, messages: Sequence[dict[str, str]], /) -> int:
        return len(self._engine.apply_chat_template(list(messages)))

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
    ) -> EngineCompletion:
        prompt = self._engine.apply_chat_template(list(messages))

        def prefill_progress(done: int, total: int, _num_chunks_done: int) -> None:
            if on_progress is not None:
                on_progress(done, total)

        result = self._engine.generate(
            prompt,
            SamplingParams(max_new_tokens=max_new_tokens),
            on_progress=prefill_progress,
        )
        stats = result.stats.to_dict()
        stats["finish_reason"] = result.finish_reason
        return EngineCompletion(text=result.text, stats=stats)
