"""Paged KV cache bookkeeping: a free list, reference counts and hashes of full blocks.

A block is in exactly one of three states:
  in use       ref_count > 0, listed in some sequence's block_table;
  cached free  ref_count == 0 but its hash is registered, so a later prompt with the same
               prefix can take it back (kept in LRU order, evicted when the free list is empty);
  free         ref_count == 0 and no hash.

A block's hash chains the previous block's hash with this block's token ids, so equal hashes
mean equal prefixes. Hashes are registered only in commit_computed(), after the engine has
written the block's KV, and only for full blocks. A hit also compares token ids, so a hash
collision can never hand out the wrong KV.
"""

from __future__ import annotations

import hashlib
import heapq
import sys
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass

from engine.errors import EngineError
from engine.sequence import PLACEHOLDER_TOKEN_ID, Sequence

NO_PARENT_HASH = -1


class NoFreeBlocksError(EngineError):
    """The KV cache has no free block left for a request; the caller must wait or preempt."""


def compute_block_hash(token_ids: SequenceOf[int], parent_hash: int = NO_PARENT_HASH) -> int:
    """Stable 64-bit hash of (parent block hash, token ids) (blake2b, same across processes)."""
    ids = array("q", token_ids)
    if sys.byteorder == "big":
        ids.byteswap()
    digest = hashlib.blake2b(digest_size=8)
    digest.update(parent_hash.to_bytes(8, "little", signed=True))
    digest.update(ids.tobytes())
    return int.from_bytes(digest.digest(), "little", signed=True)


def prefix_block_keys(seq: Sequence, block_size: int) -> Iterator[tuple[int, tuple[int, ...]]]:
    """(chain hash, token ids) of seq's full blocks in order, up to the block holding its last
    token (never a prefix hit). The prompt's are computed once and kept on seq (its tokens never
    change; a 128K prompt is 8,192 blake2b hashes, and a request is looked up several times
    before it runs); the rest are computed on each call."""
    if seq.prompt_keys_block_size != block_size:
        seq.prompt_keys, seq.prompt_keys_block_size = [], block_size
    keys = seq.prompt_keys
    num_blocks = (seq.num_tokens - 1) // block_size
    num_prompt_blocks = min(seq.num_prompt_tokens // block_size, num_blocks)
    parent_hash = NO_PARENT_HASH
    for block_index in range(num_blocks):
        if block_index < len(keys):
            key = keys[block_index]
        else:
            start = block_index * block_size
            token_ids = tuple(seq.token_ids[start : start + block_size])
            key = (compute_block_hash(token_ids, parent_hash), token_ids)
            if block_index < num_prompt_blocks:
                keys.append(key)
        parent_hash = key[0]
        yield key


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    hash: int | None = None
    token_ids: tuple[int, ...] | None = None


@dataclass
class BlockManagerStats:
    num_hits: int = 0  # blocks reused from the prefix cache at allocate()
    num_misses: int = 0  # blocks allocated fresh at allocate()
    num_evictions: int = 0  # cached blocks whose hash was dropped to make room


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_cache: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(
                f"num_blocks ({num_blocks}) and block_size ({block_size}) must be positive."
            )
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_cache = enable_prefix_cache
        self.blocks = [Block(block_id) for block_id in range(num_blocks)]
        self.stats = BlockManagerStats()
        # A heap: the lowest free id first keeps a sequence's blocks in consecutive runs.
        self._free_block_ids: list[int] = list(range(num_blocks))
        # Insertion order is recency: the first key is the least recently freed.
        self._cached_free_block_ids: OrderedDict[int, None] = OrderedDict()
        self._hash_to_block_id: dict[int, int] = {}
        # With record_registered (the KV tiers are on): (seq, block index, block id) of every
        # block registered by commit_computed, for the tiers to copy down (prompt blocks) and
        # to know by tag (all); they drain it.
        self.record_registered = False
        self.registered: list[tuple[Sequence, int, int]] = []

    # ---- capacity -------------------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        """Blocks that can be handed out now, counting evictable cached blocks."""
        return len(self._free_block_ids) + len(self._cached_free_block_ids)

    @property
    def num_cached_free_blocks(self) -> int:
        return len(self._cached_free_block_ids)

    @property
    def num_cached_blocks(self) -> int:
        """Blocks registered under a prefix hash, whether in use or not."""
        return len(self._hash_to_block_id)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def num_blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def can_allocate(self, seq: Sequence, *, reserved: int = 0) -> bool:
        """Whether allocate(seq) would succeed now, prefix hits included, with `reserved` free
        blocks left for others (the lower tiers' loads under way)."""
        hit_block_ids = self._find_prefix_hits(seq)
        num_new_blocks = self.num_blocks_for(seq.num_tokens) - len(hit_block_ids)
        # A hit on a cached free block takes that block out of the free pool too.
        num_revived = sum(1 for b in hit_block_ids if self.blocks[b].ref_count == 0)
        return num_new_blocks + num_revived + reserved <= self.num_free_blocks

    # ---- prefill --------------------------------------------------------------------------

    def allocate(self, seq: Sequence) -> None:
        """Give seq blocks for all of its tokens, reusing cached full blocks of its prefix.

        Sets seq.num_cached_tokens = seq.num_computed_tokens = tokens covered by hits. Hits
        stop one block short of a block-aligned prompt, so at least one token is computed and
        the engine gets logits for the last position.
        """
        if seq.block_table:
            raise ValueError(f"request {seq.request_id} already has blocks; free it first.")
        if seq.num_tokens == 0:
            raise ValueError(f"request {seq.request_id} has no tokens to allocate.")
        seq.block_size = self.block_size
        if not self.can_allocate(seq):
            raise NoFreeBlocksError(
                f"Not enough KV cache blocks for request {seq.request_id}: it needs "
                f"{self.num_blocks_for(seq.num_tokens)} blocks and {self.num_free_blocks} of "
                f"{self.num_blocks} are free."
            )
        hit_block_ids = self._find_prefix_hits(seq)
        # Take hits first: fresh allocations below may evict cached blocks, never these.
        for block_id in hit_block_ids:
            self._take_ref(block_id)
        seq.block_table = list(hit_block_ids)
        seq.block_hashes = [self.blocks[b].hash for b in hit_block_ids]  # type: ignore[misc]
        num_new_blocks = self.num_blocks_for(seq.num_tokens) - len(hit_block_ids)
        # In id order: blocks freed together come back as a run of consecutive ids, and a
        # sequence on consecutive blocks lets the attention read its KV as one plain tensor
        # (flash-attn's paged kernel with 16-token pages ran 7% slower on an H200).
        seq.block_table.extend(sorted(self._allocate_fresh_block() for _ in range(num_new_blocks)))
        self.stats.num_hits += len(hit_block_ids)
        self.stats.num_misses += num_new_blocks
        seq.num_cached_tokens = len(hit_block_ids) * self.block_size
        seq.num_computed_tokens = seq.num_cached_tokens

    def commit_computed(self, seq: Sequence, num_computed_tokens: int) -> None:
        """Record that KV of positions [0, num_computed_tokens) is written; hash new full blocks.

        After a decode step that appended the sampled token, that is seq.num_tokens - 1: the
        sampled token's own KV is written by the next step.
        """
        if not seq.num_computed_tokens <= num_computed_tokens <= seq.num_tokens:
            raise ValueError(
                f"num_computed_tokens for request {seq.request_id} must grow within "
                f"[{seq.num_computed_tokens}, {seq.num_tokens}], got {num_computed_tokens}."
            )
        if num_computed_tokens > len(seq.block_table) * self.block_size:
            raise ValueError(
                f"request {seq.request_id} has blocks for {len(seq.block_table) * self.block_size}"
                f" tokens, fewer than the {num_computed_tokens} said to be computed."
            )
        seq.num_computed_tokens = num_computed_tokens
        if not self.enable_prefix_cache:
            return
        # Only blocks that are full and fully computed; a partial last block is never hashed,
        # nor one holding a token whose id is still on the device (hashed by a later commit).
        keys = seq.prompt_keys if seq.prompt_keys_block_size == self.block_size else []
        for block_index in range(len(seq.block_hashes), num_computed_tokens // self.block_size):
            if block_index < len(keys):  # the prompt's, hashed when it was looked up
                block_hash, token_ids = keys[block_index]
            else:
                token_ids = tuple(seq.block_token_ids(block_index))
                if PLACEHOLDER_TOKEN_ID in token_ids:
                    break
                parent_hash = seq.block_hashes[-1] if seq.block_hashes else NO_PARENT_HASH
                block_hash = compute_block_hash(token_ids, parent_hash)
            seq.block_hashes.append(block_hash)
            block = self.blocks[seq.block_table[block_index]]
            # Another request may have computed and registered the same prefix meanwhile:
            # keep that one; this block stays private and is plainly freed later.
            if block.hash is None and block_hash not in self._hash_to_block_id:
                block.hash = block_hash
                block.token_ids = token_ids
                self._hash_to_block_id[block_hash] = block.block_id
                if self.record_registered:
                    self.registered.append((seq, block_index, block.block_id))

    # ---- decode ---------------------------------------------------------------------------

    def can_append(self, seq: Sequence) -> bool:
        return self._needs_new_block(seq) <= self.num_free_blocks

    def append_slot(self, seq: Sequence) -> None:
        """Make sure a cache slot exists for position seq.num_tokens - 1 (the token to decode)."""
        if self._needs_new_block(seq):
            if not self.num_free_blocks:
                raise NoFreeBlocksError(
                    f"No free KV cache block to continue request {seq.request_id}."
                )
            seq.block_table.append(self._allocate_fresh_block())

    # ---- release --------------------------------------------------------------------------

    def free(self, seq: Sequence) -> None:
        """Drop seq's references; blocks nobody else uses become free (or cached free)."""
        # Freed tail-first, so the LRU evicts the ends of prefixes before their beginnings.
        for block_id in reversed(seq.block_table):
            self._drop_ref(block_id)
        seq.block_table = []
        seq.block_hashes = []
        # num_cached_tokens stays: it records what allocate() reused, for the request's stats.
        seq.num_computed_tokens = 0

    def truncate(self, seq: Sequence, num_tokens: int) -> None:
        """Keep only seq's first num_tokens tokens and the blocks that hold them.

        If the new last block is partial and shared with another request, later writes into
        it would corrupt that request's KV: it is swapped for a fresh private block, and
        seq.num_computed_tokens drops to the block boundary so the engine recomputes those
        few tokens. A private block keeps its KV but loses its hash (it will be written).
        """
        if not 0 <= num_tokens <= seq.num_tokens:
            raise ValueError(
                f"cannot truncate request {seq.request_id} to {num_tokens} tokens; "
                f"it has {seq.num_tokens}."
            )
        num_kept_blocks = self.num_blocks_for(num_tokens)
        for block_id in reversed(seq.block_table[num_kept_blocks:]):
            self._drop_ref(block_id)
        del seq.block_table[num_kept_blocks:]
        del seq.token_ids[num_tokens:]
        seq.num_prompt_tokens = min(seq.num_prompt_tokens, num_tokens)
        seq.num_computed_tokens = min(seq.num_computed_tokens, num_tokens)
        num_full_blocks = num_tokens // self.block_size
        del seq.block_hashes[num_full_blocks:]
        # The prompt's hashes past the cut hashed tokens that are gone (a tail may follow).
        if seq.prompt_keys_block_size == self.block_size:
            del seq.prompt_keys[num_full_blocks:]
        else:
            seq.prompt_keys = []
        if num_kept_blocks > num_full_blocks:
            self._make_last_block_writable(seq)
        seq.num_cached_tokens = min(seq.num_cached_tokens, seq.num_computed_tokens)

    # ---- lower tiers (engine/kv_tiers) -----------------------------------------------------

    def cached_block_id(self, block_hash: int, token_ids: tuple[int, ...]) -> int | None:
        """The block holding this prefix block's KV in the cache, or None."""
        block_id = self._hash_to_block_id.get(block_hash)
        if block_id is None or self.blocks[block_id].token_ids != token_ids:
            return None
        return block_id

    def hold(self, block_ids: SequenceOf[int]) -> None:
        """Take a reference on each block (kept from eviction and reuse until release)."""
        for block_id in block_ids:
            self._take_ref(block_id)

    def release(self, block_ids: SequenceOf[int]) -> None:
        for block_id in reversed(block_ids):
            self._drop_ref(block_id)

    def import_block(self, block_hash: int, token_ids: tuple[int, ...]) -> int:
        """A fresh block registered under block_hash, held once (the caller writes its KV, then
        releases it: it stays in the cache for allocate() to find)."""
        if block_hash in self._hash_to_block_id:
            raise ValueError("the block is already in the cache; import only what is missing.")
        block_id = self._allocate_fresh_block()
        block = self.blocks[block_id]
        block.hash, block.token_ids = block_hash, token_ids
        self._hash_to_block_id[block_hash] = block_id
        return block_id

    def forget_hashes(self, block_hashes: SequenceOf[int]) -> int:
        """Drop these prefixes from the cache (a deleted document); blocks in use keep their KV
        for their request but are never found again. Returns how many were dropped."""
        num_dropped = 0
        for block_hash in block_hashes:
            block_id = self._hash_to_block_id.get(block_hash)
            if block_id is None:
                continue
            block = self.blocks[block_id]
            self._forget_hash(block)
            if block.ref_count == 0:
                del self._cached_free_block_ids[block_id]
                heapq.heappush(self._free_block_ids, block_id)
            num_dropped += 1
        return num_dropped

    def forget_cached_free(self) -> int:
        """Drop every cached block nobody uses (benchmarks: a device cache as after eviction)."""
        block_ids = list(self._cached_free_block_ids)
        return self.forget_hashes([self.blocks[b].hash for b in block_ids])  # type: ignore[misc]

    # ---- internals ------------------------------------------------------------------------

    def _find_prefix_hits(self, seq: Sequence) -> list[int]:
        """Block ids of the longest cached prefix of seq (no state is changed)."""
        if not self.enable_prefix_cache:
            return []
        hit_block_ids: list[int] = []
        for block_hash, token_ids in prefix_block_keys(seq, self.block_size):
            block_id = self._hash_to_block_id.get(block_hash)
            if block_id is None or self.blocks[block_id].token_ids != token_ids:
                break
            hit_block_ids.append(block_id)
        return hit_block_ids

    def _needs_new_block(self, seq: Sequence) -> int:
        return int(len(seq.block_table) < self.num_blocks_for(seq.num_tokens))

    def _take_ref(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self._cached_free_block_ids[block_id]
        block.ref_count += 1

    def _drop_ref(self, block_id: int) -> None:
        block = self.blocks[block_id]
        block.ref_count -= 1
        if block.ref_count > 0:
            return
        if block.hash is not None:
            self._cached_free_block_ids[block_id] = None
        else:
            heapq.heappush(self._free_block_ids, block_id)

    def _allocate_fresh_block(self) -> int:
        if self._free_block_ids:
            block_id = heapq.heappop(self._free_block_ids)
        elif not self._cached_free_block_ids:
            raise NoFreeBlocksError("The KV cache has no free block left.")
        else:
            block_id, _ = self._cached_free_block_ids.popitem(last=False)
            self._forget_hash(self.blocks[block_id])
            self.stats.num_evictions += 1
        self.blocks[block_id].ref_count = 1
        return block_id

    def _forget_hash(self, block: Block) -> None:
        if block.hash is not None and self._hash_to_block_id.get(block.hash) == block.block_id:
            del self._hash_to_block_id[block.hash]
        block.hash = None
        block.token_ids = None

    def _make_last_block_writable(self, seq: Sequence) -> None:
        block = self.blocks[seq.block_table[-1]]
        if block.ref_count == 1:
            self._forget_hash(block)
            return
        self._drop_ref(block.block_id)
        seq.block_table[-1] = self._allocate_fresh_block()
        seq.num_computed_tokens = min(
            seq.num_computed_tokens, (len(seq.block_table) - 1) * self.block_size
        )
