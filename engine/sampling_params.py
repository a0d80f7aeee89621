"""How to pick the next token and when to stop; frozen and validated once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        # Lists are accepted for convenience and stored as tuples to stay hashable.
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        object.__setattr__(self, "stop_strings", tuple(self.stop_strings))
        if _is_bad_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise ValueError(
                f"max_new_tokens must be a positive integer, not {self.max_new_tokens!r}."
            )
        if not _is_number(self.temperature) or not 0.0 <= self.temperature < float("inf"):
            raise ValueError(
                f"temperature must be 0 (greedy) or a positive number, not {self.temperature!r}."
            )
        if not _is_number(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p!r}.")
        for token_id in self.stop_token_ids:
            if _is_bad_int(token_id) or token_id < 0:
                raise ValueError(f"stop_token_ids must be token ids (>= 0), not {token_id!r}.")
        for text in self.stop_strings:
            if not isinstance(text, str) or not text:
                raise ValueError("stop_strings must be non-empty strings.")
        if self.seed is not None and (_is_bad_int(self.seed) or self.seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, not {self.seed!r}.")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0


def _is_bad_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)
