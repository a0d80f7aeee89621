"""Progress over the requests of one call to the model server (worker/model/openai_client.py):
prompt tokens of the requests answered so far, and tokens written over all of them."""

from __future__ import annotations

import threading

from app import metrics
from pipelines.protocols import ProgressCallback, TokenProgressCallback


class RequestProgress:
    """Progress over the requests of one call, from their threads."""

    def __init__(
        self,
        prompts: list[int],
        limit: int,
        on_progress: ProgressCallback | None,
        on_tokens: TokenProgressCallback | None,
    ) -> None:
        self.prompts = prompts
        self.done = [False] * len(prompts)
        self.written = [0] * len(prompts)
        self.limit = limit
        self.on_progress, self.on_tokens = on_progress, on_tokens
        self._lock = threading.Lock()

    def prompt_done(self, index: int) -> None:
        with self._lock:
            self.done[index] = True
            done = sum(p for p, d in zip(self.prompts, self.done, strict=True) if d)
        if self.on_progress is not None:
            self.on_progress(done, sum(self.prompts))

    def token(self, index: int) -> None:
        metrics.record_generated_tokens()
        with self._lock:
            self.written[index] += 1
            written = sum(self.written)
        if self.on_tokens is not None:
            self.on_tokens(min(written, self.limit), self.limit)

    def restart(self, index: int) -> None:
        """A request sent again: its tokens so far count no more."""
        with self._lock:
            self.written[index] = 0
            self.done[index] = False
