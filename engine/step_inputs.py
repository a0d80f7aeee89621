"""What one model step takes in for each sequence: its chunk of tokens (ChunkInput) and the
input ids still on the device from the previous step's samples (FedTokens); and what its launch
gives back (LaunchedStep: the sampled ids, on their way to the host). Shared by the model runner,
the CUDA graphs that replay its decode steps, and the step pipeline that reads the ids back."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.sampler import to_device
from engine.scheduler import Step

LOGITS_NONE, LOGITS_LAST, LOGITS_ALL = "none", "last", "all"


@dataclass(frozen=True)
class FedTokens:
    """Input ids that are still on the device: the previous step's sampled tokens, which the
    engine has not read back yet. Flat row rows[i] of this step takes source[source_rows[i]]."""

    rows: list[int]
    source: torch.Tensor  # [R] int64 on the runner's device
    source_rows: list[int]

    def write_into(self, input_ids: torch.Tensor) -> None:
        """input_ids: [T] on the device, changed in place (no wait for the device)."""
        n = len(self.rows)
        if self.rows == self.source_rows == list(range(n)):
            input_ids[:n].copy_(self.source[:n])  # the usual decode step: same rows, same order
            return
        device = input_ids.device
        rows = to_device(self.rows, torch.long, device)
        source_rows = to_device(self.source_rows, torch.long, device)
        input_ids.index_copy_(0, rows, self.source.index_select(0, source_rows))


@dataclass(frozen=True)
class ChunkInput:
    """Positions [start, start + len(token_ids)) of one sequence; which logits it needs."""

    token_ids: list[int]
    start: int
    block_table: list[int]
    logits: str = LOGITS_LAST

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


@dataclass
class LaunchedStep:
    """A step whose work is queued on the device; its sampled tokens are not read yet."""

    step: Step
    started: float
    sampled: torch.Tensor | None  # [R] int64 on the device, one per sampling request
    sampled_host: torch.Tensor | None  # the same, being copied to the host
    done: torch.cuda.Event | None  # recorded after the copy (CUDA only)
    row_of: dict[int, int]  # request id -> its row in sampled

    def token_ids(self) -> list[int]:
        """Wait for the step and read its sampled tokens."""
        if self.done is not None:
            self.done.synchronize()
        return [] if self.sampled_host is None else self.sampled_host.tolist()
