"""The lower KV tiers of one placement, wired to its KV cache and block manager.

Down (write-behind): after each step, the prompt blocks it registered in the prefix cache, of
requests that carry a cache tag, are copied to host memory -- on a GPU on a side stream that
waits for the step, the blocks held until the copy is done -- then kept in the CPU tier and
handed to the disk writer's thread. No request waits for any of it.

Up (load, loads_up.py): before a request's prefill, its prompt's blocks that the lower tiers
hold are brought into the cache, disk reads overlapped with other requests' steps.

A tag forgotten (a document deleted), here or by any process sharing the disk folder (its
tombstone, looked for at most once a second), is dropped from every tier.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field, replace

import torch

from engine.block_manager import BlockManager
from engine.kv_cache import KVCache
from engine.kv_tiers.block_loads import CPU_TIER, DISK_TIER, copy_blocks_to_host, make_read_pool
from engine.kv_tiers.cache_blocks import CacheBlocks
from engine.kv_tiers.cpu_tier import CpuTier
from engine.kv_tiers.disk_tier import DiskTier, check_tag
from engine.kv_tiers.disk_writer import DiskWriter
from engine.kv_tiers.host_blocks import AHEAD_BYTES, HostBlocks, HostCounters
from engine.kv_tiers.loads_up import LoadsUp
from engine.kv_tiers.tombstones import read_tombstone

FORGOTTEN_POLL_S = 1.0


@dataclass
class TierCounters:
    """Since the engine started, per tier (Prometheus takes the differences)."""

    num_hit_blocks: int = 0
    num_missed_blocks: int = 0
    num_loaded_bytes: int = 0
    load_seconds: float = 0.0
    num_stored_bytes: int = 0


@dataclass
class WriteBehindCounters:
    """The write-behind's cost to the engine's thread, since the engine started."""

    num_blocks: int = 0  # blocks copied down
    seconds: float = 0.0  # the engine thread's time in after_step (choosing, copying, keeping)


@dataclass
class _PendingSave:
    done: torch.cuda.Event
    block_ids: list[int]
    items: list[tuple[int, tuple[int, ...], torch.Tensor, str]]  # hash, tokens, host KV, tag
    sums: torch.Tensor | None  # [n, 2] in pinned memory: the blocks' "sum64x2", when computed


@dataclass
class TieredKVCache(LoadsUp):
    kv_cache: KVCache
    blocks: BlockManager
    cpu: CpuTier | None
    disk: DiskTier | None
    counters: dict[str, TierCounters] = field(
        default_factory=lambda: {CPU_TIER: TierCounters(), DISK_TIER: TierCounters()}
    )
    # Block files' checksums computed and checked on the cache's device (block_sums.py;
    # EngineConfig.kv_device_checksums).
    device_sums: bool = False

    def __post_init__(self) -> None:
        self.blocks.record_registered = True
        # One block's KV as the tiers hold it: [2, L, block_size, KV, D] in the cache's dtype, or
        # an FP8 cache's values and scales packed as bytes (cache_blocks.py).
        self.cache_blocks = CacheBlocks(self.kv_cache.tensor, self.kv_cache.scales)
        self.device = self.cache_blocks.device
        self.dtype = self.cache_blocks.dtype
        self._dtype_name = str(self.dtype).removeprefix("torch.")  # as block files name it
        self.block_shape = self.cache_blocks.block_shape
        self._block_bytes = self.cache_blocks.block_bytes
        self.writer = DiskWriter(self.disk) if self.disk is not None else None
        self._is_cuda = self.device.type == "cuda"
        self._streams = (
            (torch.cuda.Stream(self.device), torch.cuda.Stream(self.device))
            if self._is_cuda
            else None
        )
        self._pending: list[_PendingSave] = []
        self._tag_hashes: dict[str, set[int]] = defaultdict(set)
        self._forgotten: set[str] = self.disk.forgotten_tags() if self.disk is not None else set()
        self._next_forgotten_poll = 0.0
        self._pool = make_read_pool() if self.disk is not None else None
        self._stream = self._streams[0] if self._streams else None  # copies up
        self._init_loads()
        # On a GPU the host blocks are pinned ahead, off the engine's thread: the CPU tier's cap
        # and room for blocks on their way to disk (host_blocks.py says why).
        pool_bytes = 0
        if self._is_cuda:
            pool_bytes = (self.cpu.max_bytes if self.cpu is not None else 0) + AHEAD_BYTES
        self._host = HostBlocks(
            self.block_shape,
            self.dtype,
            pinned=self._is_cuda,
            pool_bytes=pool_bytes,
            ahead_bytes=AHEAD_BYTES if self._is_cuda else 0,
        )
        self.write_behind = WriteBehindCounters()

    # ---- down: after each step ------------------------------------------------------------

    def after_step(self) -> None:
        """Copy the prompt blocks the step registered (of tagged requests) down the tiers."""
        started = time.perf_counter()
        self._after_step()
        self.write_behind.seconds += time.perf_counter() - started

    def _after_step(self) -> None:
        registered, self.blocks.registered = self.blocks.registered, []
        todo: list[tuple[int, int, tuple[int, ...], str]] = []
        stale: list[int] = []
        for seq, block_index, block_id in registered:
            tag = seq.cache_tag
            block = self.blocks.blocks[block_id]
            if tag is None or block.hash is None:
                continue
            if block_index >= len(seq.block_hashes) or seq.block_hashes[block_index] != block.hash:
                continue  # the block changed hands since it was registered
            if tag in self._forgotten:
                stale.append(block.hash)  # a request of a deleted document still running
                continue
            self._tag_hashes[tag].add(block.hash)
            if block_index >= seq.num_prompt_tokens // self.blocks.block_size:
                continue  # generated text: known by its tag (forgotten with it), not kept down
            if self._is_stored(block.hash):
                if self.writer is not None:
                    self.writer.submit(block.hash, block.token_ids, None, tag)
                continue
            todo.append((block_id, block.hash, block.token_ids, tag))  # type: ignore[arg-type]
        if stale:
            self.blocks.forget_hashes(stale)
        if todo:
            self._copy_out(todo)
            self.write_behind.num_blocks += len(todo)
        self.poll()

    def _is_stored(self, block_hash: int) -> bool:
        in_cpu = self.cpu is None or block_hash in self.cpu
        on_disk = self.disk is None or self.disk.contains(block_hash)
        return in_cpu and on_disk

    def _copy_out(self, todo: list[tuple[int, int, tuple[int, ...], str]]) -> None:
        cache = self.cache_blocks
        block_ids = [item[0] for item in todo]
        hosts = [self._host.take() for _ in todo]
        items = [
            (block_hash, token_ids, host, tag)
            for (_, block_hash, token_ids, tag), host in zip(todo, hosts, strict=True)
        ]
        if not self._is_cuda:
            sums = None
            if self.device_sums:
                sums = torch.empty((len(todo), 2), dtype=torch.int64)
            copy_blocks_to_host(cache, block_ids, hosts, sums)
            for item, item_sums in zip(items, _rows(sums, len(items)), strict=True):
                self._keep(*item, item_sums)
            return
        self.blocks.hold(block_ids)  # not reused until the copy is done
        stream = self._streams[1]
        stream.wait_stream(torch.cuda.current_stream(self.device))  # after the step's writes
        host_sums = None
        with torch.cuda.stream(stream):
            # Allocated on the side stream: memory of the compute stream's pool, freed here
            # while the side stream still waits to write it, would go to the next step's inputs.
            sums = None
            if self.device_sums:
                sums = torch.empty((len(todo), 2), dtype=torch.int64, device=self.device)
            copy_blocks_to_host(cache, block_ids, hosts, sums)
            if sums is not None:
                host_sums = torch.empty(sums.shape, dtype=sums.dtype, pin_memory=True)
                host_sums.copy_(sums, non_blocking=True)
            done = torch.cuda.Event()
            done.record(stream)
        self._pending.append(_PendingSave(done, block_ids, items, host_sums))

    def _keep(
        self,
        block_hash: int,
        token_ids: tuple[int, ...],
        kv: torch.Tensor,
        tag: str,
        sums: tuple[int, int] | None = None,
    ) -> None:
        if tag in self._forgotten:
            return
        num_bytes = kv.numel() * kv.element_size()
        if self.cpu is not None and block_hash not in self.cpu:
            self.cpu.put(block_hash, token_ids, kv)
            self.counters[CPU_TIER].num_stored_bytes += num_bytes
        if self.writer is not None:
            self.writer.submit(block_hash, token_ids, kv, tag, sums)
            self.counters[DISK_TIER].num_stored_bytes += num_bytes

    # ---- housekeeping ---------------------------------------------------------------------

    def poll(self, *, wait: bool = False) -> None:
        """Finish the copies down that are done (all of them with wait), and drop the tags that
        another process forgot."""
        still = []
        for pending in self._pending:
            if wait:
                pending.done.synchronize()
            if not pending.done.query():
                still.append(pending)
                continue
            self.blocks.release(pending.block_ids)
            for item, sums in zip(
                pending.items, _rows(pending.sums, len(pending.items)), strict=True
            ):
                self._keep(*item, sums)
        self._pending = still
        now = time.monotonic()
        if self.disk is not None and now >= self._next_forgotten_poll:
            self._next_forgotten_poll = now + FORGOTTEN_POLL_S
            for tag in self.disk.forgotten_tags() - self._forgotten:
                listed = read_tombstone(self.disk.root, tag)
                if listed is not None:  # else its deletion is under way: next time
                    self._forget_here(tag, self.disk.hashes_in_namespace(listed))

    def forget(self, tag: str) -> None:
        """Drop every block of tag from every tier (and its files from the shared folder)."""
        self._forget_here(check_tag(tag), [])

    def _forget_here(self, tag: str, listed_hashes: list[int]) -> None:
        """Drop tag's blocks from every tier of this process: those it kept or loaded for tag,
        and those the folder listed for it (an untagged request may have loaded them)."""
        self._forgotten.add(tag)
        hashes = self._tag_hashes.pop(tag, set()) | set(listed_hashes)
        if self.disk is not None:
            # Again from here: a file another process wrote meanwhile goes too.
            hashes |= set(self.disk.hashes_in_namespace(self.disk.forget_tag(tag)))
        self._stop_loads(tag, hashes)  # what they placed is dropped below
        self.blocks.forget_hashes(list(hashes))
        if self.cpu is not None:
            self.cpu.drop(hashes)

    def flush(self) -> None:
        """Wait until every block copied down so far is in the CPU tier and on disk."""
        self.poll(wait=True)
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        self.poll(wait=True)
        if self.writer is not None:
            self.writer.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.disk is not None:
            self.disk.apply_touches()  # reads that ended after the last load's touches
        self._host.close()

    def wait_host_pool(self, timeout_s: float | None = None) -> bool:
        """Wait until the host memory pinned at start is ready (a restarted worker's first
        loads then pin nothing); False if timeout_s passed first."""
        return self._host.wait_pool(timeout_s)

    def host_counters(self) -> HostCounters:
        return replace(self._host.counters)

    def _has(self, tier: str) -> bool:
        return (self.cpu if tier == CPU_TIER else self.disk) is not None


def _rows(sums: torch.Tensor | None, count: int) -> list[tuple[int, int] | None]:
    """The blocks' sums as (plain, weighted) each; None each where none were computed."""
    if sums is None:
        return [None] * count
    return [(plain, weighted) for plain, weighted in sums.tolist()]
