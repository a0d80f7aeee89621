"""How to pick the next token and when to stop, per request; frozen and validated once.

The repetition controls exist because small models loop under greedy decoding (issue 11): a
request can penalise tokens it has already produced, ban repeated n-grams, and have a loop
detector end it. penalty_scope defaults to "output" so that a model answering from a document
may still quote that document verbatim; "all" counts the prompt too, as transformers does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

PENALTY_SCOPES = ("output", "all")
# OpenAI's and vLLM's range for frequency and presence penalties.
MAX_ABS_COUNT_PENALTY = 2.0


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 means no top-k cut
    stop_token_ids: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()
    seed: int | None = None
    # Keep writing past the model's end-of-sequence tokens (benchmarks that time a fixed length).
    ignore_eos: bool = False
    # transformers' rule: a seen token's logit is divided by this when positive, multiplied
    # when negative; 1.0 is off.
    repetition_penalty: float = 1.0
    # OpenAI's rule: logit -= frequency_penalty * count + presence_penalty * (count > 0).
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # transformers' rule: a token that would complete an n-gram already seen is banned; 0 is off.
    no_repeat_ngram_size: int = 0
    penalty_scope: str = "output"  # which tokens the four rules above count: "output" or "all"
    # End the generation with finish_reason "loop" when the loop detector fires.
    stop_on_loop: bool = True
    # The loop detector's phrase rule: a phrase of 5 words seen more often than this within
    # one line is a loop (issue 11 counts more than two as a failure); 0 turns the rule off.
    max_phrase_repeats: int = 2

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
        if _is_bad_int(self.top_k) or self.top_k < 0:
            raise ValueError(f"top_k must be 0 (no cut) or a positive integer, not {self.top_k!r}.")
        for token_id in self.stop_token_ids:
            if _is_bad_int(token_id) or token_id < 0:
                raise ValueError(f"stop_token_ids must be token ids (>= 0), not {token_id!r}.")
        for text in self.stop_strings:
            if not isinstance(text, str) or not text:
                raise ValueError("stop_strings must be non-empty strings.")
        if self.seed is not None and (_is_bad_int(self.seed) or self.seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, not {self.seed!r}.")
        self._check_repetition_controls()

    def _check_repetition_controls(self) -> None:
        if not _is_finite(self.repetition_penalty) or self.repetition_penalty <= 0.0:
            raise ValueError(
                "repetition_penalty must be a positive number (1.0 is off, above 1 penalises "
                f"repeats), not {self.repetition_penalty!r}."
            )
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if not _is_finite(value) or abs(value) > MAX_ABS_COUNT_PENALTY:
                raise ValueError(
                    f"{name} must be a number from -{MAX_ABS_COUNT_PENALTY} to "
                    f"{MAX_ABS_COUNT_PENALTY} (0 is off), not {value!r}."
                )
        if _is_bad_int(self.no_repeat_ngram_size) or self.no_repeat_ngram_size < 0:
            raise ValueError(
                "no_repeat_ngram_size must be 0 (off) or a positive integer, not "
                f"{self.no_repeat_ngram_size!r}."
            )
        if self.penalty_scope not in PENALTY_SCOPES:
            raise ValueError(
                'penalty_scope must be "output" (only generated tokens count) or "all" '
                f"(prompt and generated tokens), not {self.penalty_scope!r}."
            )
        if not isinstance(self.stop_on_loop, bool):
            raise ValueError(f"stop_on_loop must be True or False, not {self.stop_on_loop!r}.")
        if _is_bad_int(self.max_phrase_repeats) or self.max_phrase_repeats < 0:
            raise ValueError(
                "max_phrase_repeats must be 0 (off) or a positive integer, not "
                f"{self.max_phrase_repeats!r}."
            )

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def has_penalties(self) -> bool:
        """Whether sampling needs the request's token history."""
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or self.no_repeat_ngram_size > 0
        )


def _is_bad_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _is_finite(value: object) -> bool:
    return _is_number(value) and math.isfinite(value)


@dataclass(frozen=True)
class SamplingRow:
    """What the sampler needs of one request at one step.

    prompt_token_ids are read only when the params count the prompt (penalty_scope "all"); for
    long prompts pass a cached 1-D CPU or device tensor instead of a list, so that it is not
    converted again every step.
    """

    params: SamplingParams
    generator: torch.Generator | None = None
    prompt_token_ids: Sequence[int] | torch.Tensor = ()
    output_token_ids: Sequence[int] = ()
