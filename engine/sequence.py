"""One request's token state: its tokens, its KV block table and how much of it is computed.

While blocks are allocated, counters (in tokens) satisfy
    0 <= num_cached_tokens <= num_computed_tokens <= num_tokens
num_cached_tokens is set once by BlockManager.allocate (tokens reused from the prefix cache);
num_computed_tokens grows as the engine writes KV (BlockManager.commit_computed).

A sampled token whose value is still on the device (the engine runs one step ahead of what it has
read back) is held as PLACEHOLDER_TOKEN_ID at its position; the engine writes the real id there
once it has it. Only the last one or two tokens of a running sequence can be placeholders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from engine.stats import TierLoad

PLACEHOLDER_TOKEN_ID = -1


class SequenceStatus(Enum):
    WAITING = "waiting"  # queued, or preempted (its KV freed) and queued again
    RUNNING = "running"  # holds KV blocks; prefilling or decoding
    FINISHED = "finished"


@dataclass
class Sequence:
    """A prompt and the tokens generated after it.

    block_size is adopted from the BlockManager at allocate(); it only matters for the block
    properties below. block_hashes holds the chained hash of each full block whose KV is
    computed, in order (the block manager fills it; it may be longer than the set of blocks
    registered in the cache when another block already held the same hash).
    """

    request_id: int
    token_ids: list[int]
    num_prompt_tokens: int
    block_table: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0
    num_computed_tokens: int = 0
    status: SequenceStatus = SequenceStatus.WAITING
    block_size: int = 16
    block_hashes: list[int] = field(default_factory=list)
    # Scheduling: a higher priority is served first; among equals, the earlier arrival.
    priority: int = 0
    arrival_time: float = 0.0
    num_preemptions: int = 0
    # At most this many prompt tokens per step (None: the step budget decides); tests, benchmarks.
    max_chunk_tokens: int | None = None
    # The request ends once it has generated this many tokens (None: no limit known here); a
    # sequence that has them, the last maybe still a placeholder, is not scheduled again.
    max_completion_tokens: int | None = None
    # The document (or other owner) the prompt's KV belongs to: only tagged prompts are copied
    # to the lower KV tiers, and forgetting the tag removes them (engine/kv_tiers/).
    cache_tag: str | None = None
    # Set with num_cached_tokens: what of it came from each lower KV tier.
    tier_loads: dict[str, TierLoad] = field(default_factory=dict)
    # (chain hash, token ids) of the prompt's full blocks, as far as computed, for blocks of
    # prompt_keys_block_size tokens: a prompt is hashed once however often it is scheduled
    # (engine/block_manager.py, prefix_block_keys).
    prompt_keys: list[tuple[int, tuple[int, ...]]] = field(default_factory=list, repr=False)
    prompt_keys_block_size: int = 0

    def __post_init__(self) -> None:
        self.token_ids = list(self.token_ids)
        if not 0 < self.num_prompt_tokens <= len(self.token_ids):
            raise ValueError(
                f"num_prompt_tokens ({self.num_prompt_tokens}) must be between 1 and the "
                f"number of token ids ({len(self.token_ids)})."
            )
        if self.block_size < 1:
            raise ValueError(f"block_size must be a positive integer, not {self.block_size}.")

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_blocks(self) -> int:
        """Blocks needed to hold every current token."""
        return -(-self.num_tokens // self.block_size)

    @property
    def num_full_blocks(self) -> int:
        return self.num_tokens // self.block_size

    @property
    def last_block_num_tokens(self) -> int:
        """Tokens in the last (possibly partial) block; 0 only for an empty sequence."""
        return self.num_tokens - (self.num_blocks - 1) * self.block_size

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def num_completion_tokens(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_uncomputed_tokens(self) -> int:
        """Tokens whose KV is not in the cache yet (the rest of the prompt during prefill)."""
        return self.num_tokens - self.num_computed_tokens

    @property
    def is_decoding(self) -> bool:
        """Generating: only the last sampled token's KV is missing (one query per step)."""
        return self.num_completion_tokens > 0 and self.num_uncomputed_tokens == 1

    @property
    def num_known_tokens(self) -> int:
        """Tokens whose ids the host has: all but the trailing placeholders."""
        count = len(self.token_ids)
        while count and self.token_ids[count - 1] == PLACEHOLDER_TOKEN_ID:
            count -= 1
        return count

    @property
    def has_all_completion_tokens(self) -> bool:
        return (
            self.max_completion_tokens is not None
            and self.num_completion_tokens >= self.max_completion_tokens
        )

    def block_token_ids(self, block_index: int) -> list[int]:
        """Token ids held by block number block_index of this sequence."""
        start = block_index * self.block_size
        return self.token_ids[start : start + self.block_size]

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)
