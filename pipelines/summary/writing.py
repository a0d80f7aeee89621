"""Around each model call of a summary: its progress (model calls done of those planned, tokens
written) and the cleaning of what the model writes (sentences that repeat a prompt, loops).
pipelines.summary.summarize and pipelines.summary.hierarchical share these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.prompts.echo import drop_prompt_sentences
from pipelines.repetition import before_loop
from pipelines.retrieval.evidence import DocumentSentences

ProgressFn = Callable[[int, int], None]
WritingFn = Callable[["WritingProgress"], None]


@dataclass(frozen=True)
class WritingProgress:
    """How far the model has written: the tokens of the current step's calls against the most
    they may write, and the model calls done of those planned so far (sections, then combine
    calls; one for a one-pass summary). Steps: "summary", "sections", "combine"."""

    step: str
    written_tokens: int
    max_tokens: int
    num_calls_done: int
    num_calls: int


class Progress:
    """Model calls done of those planned (on_progress), and tokens written (on_writing)."""

    def __init__(
        self, callback: ProgressFn | None, total: int, on_writing: WritingFn | None = None
    ) -> None:
        self.callback, self.done, self.total = callback, 0, total
        self.on_writing = on_writing
        self._report()

    def writing(self, step: str) -> Callable[[int, int], None] | None:
        """An on_tokens callback for the calls of `step`, or None when nobody listens."""
        if self.on_writing is None:
            return None
        on_writing = self.on_writing

        def on_tokens(written: int, limit: int) -> None:
            on_writing(WritingProgress(step, written, limit, self.done, self.total))

        return on_tokens

    def step(self) -> None:
        self.done += 1
        self._report()

    def add(self, num_calls: int) -> None:
        self.total += num_calls
        self._report()

    def _report(self) -> None:
        if self.callback is not None:
            self.callback(self.done, self.total)


class PromptEchoes:
    """Drops the sentences that repeat a prompt from each text the model writes
    (pipelines.prompts.echo), counting them for the stats."""

    def __init__(self, sentences: DocumentSentences) -> None:
        self.sentences = sentences
        self.num_dropped = 0

    def clean(self, text: str) -> str:
        kept, num_dropped = drop_prompt_sentences(text.strip(), document=self.sentences.text)
        self.num_dropped += num_dropped
        return kept.strip()


def cut_loop(text: str, stats: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The model's summary up to where it starts repeating a phrase of five words a third time
    (a loop the engine's detector let through, such as a signature block copied over and over,
    whose short lines it counts one by one); the stats say how much was cut."""
    text = text.strip()
    kept = before_loop(text).strip()
    if kept != text:
        stats = {**stats, "loop_cut_chars": len(text) - len(kept)}
    return kept, stats
