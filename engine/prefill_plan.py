"""Walking a prompt chunk by chunk, halving the chunk on out-of-memory.

API (used by the engine's prefill loop; plain Python, no torch):

    PrefillChunk(start, end)                    frozen; positions [start, end) of the prompt
        .num_query_tokens -> int                end - start (tokens fed to the model)
        .num_key_tokens -> int                  end: the chunk attends to every earlier token

    PrefillProgress(*, num_prompt_tokens, chunk_size, min_chunk_size,
                    num_computed_tokens=0, multiple_of=1)
        .num_computed_tokens: int               KV written so far (start from seq.num_cached_tokens)
        .chunk_size: int                        size of the next chunk
        .chunk_sizes: list[int]                 sizes of the completed chunks, in order
        .fallbacks: list[dict]                  {"kind": "oom_halved", "detail": {...}} per halving,
                                                ready for RequestStats.fallbacks
        .num_remaining_tokens -> int; .is_done -> bool
        .next_chunk() -> PrefillChunk           the chunk to run now (same one again after halve())
        .complete(chunk) -> None                its KV is written: advance past it
        .halve() -> bool                        the pending chunk ran out of memory: retry it at
                                                half its length; False (nothing changed) when
                                                that would be below min_chunk_size
        .set_chunk_size(size) -> None           re-plan (e.g. from free memory); never above the
                                                size a halving chose

Typical loop:
    progress = PrefillProgress(num_prompt_tokens=n, num_computed_tokens=seq.num_cached_tokens,
                               chunk_size=planned, min_chunk_size=config.min_chunk_size)
    while not progress.is_done:
        chunk = progress.next_chunk()
        try:
            run_prefill(seq, chunk.start, chunk.end)      # keys: [0, chunk.end)
        except OutOfMemory:
            free the chunk's temporaries
            if not progress.halve():
                apply config.oom_policy; break
            continue
        progress.complete(chunk)                          # then BlockManager.commit_computed
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.stats import FALLBACK_OOM_HALVED


@dataclass(frozen=True)
class PrefillChunk:
    start: int
    end: int

    @property
    def num_query_tokens(self) -> int:
        return self.end - self.start

    @property
    def num_key_tokens(self) -> int:
        # The chunk's queries attend to the cached KV of [0, start) and to themselves.
        return self.end


class PrefillProgress:
    def __init__(
        self,
        *,
        num_prompt_tokens: int,
        chunk_size: int,
        min_chunk_size: int,
        num_computed_tokens: int = 0,
        multiple_of: int = 1,
    ) -> None:
        if not 0 <= num_computed_tokens <= num_prompt_tokens:
            raise ValueError(
                f"num_computed_tokens ({num_computed_tokens}) must be within the prompt's "
                f"{num_prompt_tokens} tokens."
            )
        if min_chunk_size < 1 or chunk_size < 1 or multiple_of < 1:
            raise ValueError(
                "chunk_size, min_chunk_size and multiple_of must be positive integers."
            )
        self.num_prompt_tokens = num_prompt_tokens
        self.num_computed_tokens = num_computed_tokens
        self.chunk_size = chunk_size
        self.min_chunk_size = min_chunk_size
        self.multiple_of = multiple_of
        self.chunk_sizes: list[int] = []
        self.fallbacks: list[dict[str, Any]] = []
        self._max_chunk_size: int | None = None  # set by the first halving
        self._pending: PrefillChunk | None = None

    @property
    def num_remaining_tokens(self) -> int:
        return self.num_prompt_tokens - self.num_computed_tokens

    @property
    def is_done(self) -> bool:
        return self.num_computed_tokens >= self.num_prompt_tokens

    @property
    def num_halvings(self) -> int:
        return len(self.fallbacks)

    def next_chunk(self) -> PrefillChunk:
        if self.is_done:
            raise RuntimeError("the prompt is fully computed; there is no next chunk.")
        start = self.num_computed_tokens
        self._pending = PrefillChunk(start, min(start + self.chunk_size, self.num_prompt_tokens))
        return self._pending

    def complete(self, chunk: PrefillChunk) -> None:
        if chunk != self._pending:
            raise ValueError(f"{chunk} is not the pending chunk {self._pending}.")
        self.num_computed_tokens = chunk.end
        self.chunk_sizes.append(chunk.num_query_tokens)
        self._pending = None

    def halve(self) -> bool:
        """The pending chunk ran out of memory: the next chunk restarts at the same position
        with half of the length that failed (a short last chunk halves its own length)."""
        failed_size = self._pending.num_query_tokens if self._pending else self.chunk_size
        new_size = failed_size // 2 // self.multiple_of * self.multiple_of
        if new_size < self.min_chunk_size:
            return False
        self.fallbacks.append(
            {
                "kind": FALLBACK_OOM_HALVED,
                "detail": {
                    "at_token": self.num_computed_tokens,
                    "from_chunk_size": failed_size,
                    "to_chunk_size": new_size,
                },
            }
        )
        self.chunk_size = new_size
        self._max_chunk_size = new_size
        self._pending = None
        return True

    def set_chunk_size(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"chunk size must be positive, not {size}.")
        if self._max_chunk_size is not None:
            size = min(size, self._max_chunk_size)
        self.chunk_size = size
