"""Loading a prompt's blocks up from the lower tiers: disk reads ahead on a thread pool, and
copies into the KV cache in groups (on a GPU: one DMA per run of adjacent host blocks into a
staging buffer on a side stream, then one scatter into the cache per group).

File reads, checksums and tensor copies release the GIL, so the pool's threads read and check
several files at once while the engine's thread copies the ones already read.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any

import torch

from engine.kv_tiers.block_sums import block_sums, to_device
from engine.kv_tiers.cache_blocks import CacheBlocks
from engine.kv_tiers.cpu_tier import CpuTier
from engine.kv_tiers.disk_tier import DiskTier

CPU_TIER, DISK_TIER = "cpu", "disk"
READ_AHEAD_BLOCKS = 64
# Each reads a file into pinned memory and checks it, the GIL released. Page-cache copies stop
# scaling before this: on an H100 host (16 CPUs) 8 threads read 15.6 GB/s, 16 threads 11.4.
MAX_READ_THREADS = 8
COPY_GROUP_BLOCKS = 64  # on a GPU: a staging buffer of this many blocks (128 MB at 8B bf16)

Key = tuple[int, tuple[int, ...]]  # (chain hash, token ids)


def make_read_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(
        max_workers=min(MAX_READ_THREADS, os.cpu_count() or 1), thread_name_prefix="kv-read"
    )


def host_runs(blocks: list[torch.Tensor]) -> list[tuple[int, int]]:
    """[start, end) of the runs of blocks that lie one after another in one host allocation
    (blocks cut in turn from a slab do): each run can move in one copy instead of one a block."""
    runs: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(blocks) + 1):
        if index < len(blocks):
            before, block = blocks[index - 1], blocks[index]
            if (
                block.untyped_storage().data_ptr() == before.untyped_storage().data_ptr()
                and block.data_ptr() == before.data_ptr() + before.nbytes
                and block.is_contiguous()
                and before.is_contiguous()
            ):
                continue
        runs.append((start, index))
        start = index
    return runs


def run_view(blocks: list[torch.Tensor], start: int, end: int) -> torch.Tensor:
    """The run blocks[start:end] (host_runs) as one tensor [end - start, *block shape]."""
    first = blocks[start]
    return first.as_strided(
        (end - start, *first.shape), (first.numel(), *first.stride()), first.storage_offset()
    )


Hit = tuple[str, int, tuple[int, ...], Any]  # (tier, hash, token ids, what was read: KV)


class PrefixReads:
    """The blocks of keys in order, from the CPU tier or else the disk, up to the first block
    neither holds; disk reads run ahead on the pool, and the blocks are taken as they come
    (ready()), so the engine's thread can go on stepping other requests between takes.
    waited[tier] grows by the seconds the taker spent waiting for reads.

    read_disk(hash, token ids, into) runs on the pool; into is reserve(hash)'s block (None: the
    reader takes its own memory), taken on the caller's thread in key order, so that blocks
    read one after another lie one after another in host memory (a slab's) whatever order the
    reads finish in: the copies up then move runs of them, not one block a copy (an H100 host:
    8,192 blocks of a 128K prompt placed in 3.9 s one by one, the CPU tier's runs in 0.25 s).

    What read_disk returns is handed on as it is (None: a miss). With keep_in_cpu, each block
    read is kept in the CPU tier as it comes (read_disk then returns the KV tensor); without,
    the caller decides (the tiers keep a block whose check is left to the device only once it
    passed)."""

    def __init__(
        self,
        keys: list[Key],
        *,
        cpu: CpuTier | None,
        disk: DiskTier | None,
        read_disk: Callable[[int, tuple[int, ...], torch.Tensor | None], Any],
        pool: ThreadPoolExecutor | None,
        waited: dict[str, float],
        reserve: Callable[[int], torch.Tensor | None] | None = None,
        keep_in_cpu: bool = True,
    ) -> None:
        self.cpu, self.disk, self.pool = cpu, disk, pool
        self.read_disk, self.reserve, self.waited = read_disk, reserve, waited
        self.keep_in_cpu = keep_in_cpu
        self._pending = iter(keys)
        self._num_left = len(keys)  # keys not yet taken (nor found missing)
        self._window: deque[tuple[int, tuple[int, ...], Future | None]] = deque()
        self.ended = False  # every key taken, or one missing: nothing more comes

    @property
    def num_left(self) -> int:
        """Blocks that may still come (an upper bound: a miss ends it sooner)."""
        return 0 if self.ended else self._num_left

    def ready(self, *, wait: float | None = 0.0) -> Iterator[Hit]:
        """The blocks that are ready now, in key order. The first of them is waited for up to
        `wait` seconds (None: until it comes), so with a wait at least one comes unless the
        reads end or the time passes first."""
        self._fill()
        may_wait = wait is None or wait > 0
        while self._window:
            block_hash, token_ids, future = self._window[0]
            if future is None:
                kv = self.cpu.get(block_hash, token_ids) if self.cpu is not None else None
                tier = CPU_TIER
            else:
                if not future.done():
                    if not may_wait:
                        return
                    started = time.perf_counter()
                    done, _ = futures_wait([future], timeout=wait)
                    self.waited[DISK_TIER] += time.perf_counter() - started
                    if not done:
                        return
                kv = future.result()
                tier = DISK_TIER
                if kv is not None and self.keep_in_cpu and self.cpu is not None:
                    self.cpu.put(block_hash, token_ids, kv)
            self._window.popleft()
            if kv is None:
                self.cancel()
                return
            self._num_left -= 1
            may_wait = False
            yield tier, block_hash, token_ids, kv
            self._fill()
        self.ended = True

    def cancel(self) -> None:
        """Stop: reads not started are dropped (those running end unseen)."""
        self.ended = True
        self._pending = iter(())
        for _, _, future in self._window:
            if future is not None:
                future.cancel()
        self._window.clear()

    def _fill(self) -> None:
        while len(self._window) < READ_AHEAD_BLOCKS:
            key = next(self._pending, None)
            if key is None:
                return
            block_hash, token_ids = key
            future = None
            if (
                self.disk is not None
                and self.pool is not None
                and (self.cpu is None or block_hash not in self.cpu)
            ):
                into = self.reserve(block_hash) if self.reserve is not None else None
                future = self.pool.submit(self.read_disk, block_hash, token_ids, into)
            self._window.append((block_hash, token_ids, future))


def lower_hits(
    keys: list[Key],
    *,
    cpu: CpuTier | None,
    disk: DiskTier | None,
    read_disk: Callable[[int, tuple[int, ...], torch.Tensor | None], torch.Tensor | None],
    pool: ThreadPoolExecutor | None,
    waited: dict[str, float],
    reserve: Callable[[int], torch.Tensor | None] | None = None,
) -> Iterator[Hit]:
    """Every block PrefixReads gives, waiting for each in turn (a load with nothing else to
    do meanwhile)."""
    reads = PrefixReads(
        keys, cpu=cpu, disk=disk, read_disk=read_disk, pool=pool, waited=waited, reserve=reserve
    )
    try:
        while not reads.ended:
            yield from reads.ready(wait=None)
    finally:
        reads.cancel()


def copy_blocks_to_host(
    cache: CacheBlocks,
    block_ids: list[int],
    hosts: list[torch.Tensor],
    sums: torch.Tensor | None = None,
) -> None:
    """The cache's blocks block_ids[i] into hosts[i] (on the current stream, asynchronously into
    pinned memory): per run of adjacent host blocks one gather on the cache's device and one
    copy, not two launches a block (a 128K prefill registers 8,192 blocks). sums, [n, 2] int64
    on the cache's device: filled with each block's "sum64x2" (block_sums.py)."""
    index = to_device(block_ids, cache.device)
    for start, end in host_runs(hosts):
        gathered = cache.gather(index[start:end])  # contiguous
        run_view(hosts, start, end).copy_(gathered, non_blocking=True)
        if sums is not None:
            sums[start:end] = block_sums(gathered)


def copy_blocks_from_host(
    cache: CacheBlocks,
    block_ids: list[int],
    kvs: list[torch.Tensor],
    expected: list[tuple[int, int] | None] | None = None,
) -> torch.Tensor | None:
    """kvs[i] into the cache's block block_ids[i] (on the current stream): one copy per run of
    adjacent host blocks into a staging buffer [n, *block shape], then one scatter. expected:
    per block its file's "sum64x2" still to be checked (None: checked already); returns then
    a bool tensor on the cache's device, True where a block's sums differ."""
    staging = torch.empty((len(kvs), *kvs[0].shape), dtype=cache.dtype, device=cache.device)
    for start, end in host_runs(kvs):
        staging[start:end].copy_(run_view(kvs, start, end), non_blocking=True)
    index = to_device(block_ids, cache.device)
    cache.scatter(index, staging)
    if expected is None or all(sums is None for sums in expected):
        return None
    want = to_device([sums or (0, 0) for sums in expected], cache.device)
    checked = to_device([sums is not None for sums in expected], cache.device, torch.bool)
    return (block_sums(staging) != want).any(1) & checked


class CacheWriter:
    """Copies blocks' KV into the cache's blocks in groups; on a GPU on the load stream (which
    first waits for the steps in flight: a block freed by an abort may still be written).
    Blocks given the sums of their files are checked after the copy: `checks` gets, per group,
    (its block ids, a bool tensor on the device: True where the sums differ)."""

    def __init__(
        self,
        cache: CacheBlocks,
        stream: torch.cuda.Stream | None,
        checks: list[tuple[list[int], torch.Tensor]] | None = None,
    ) -> None:
        self.cache = cache
        self.stream = stream
        self.checks = checks if checks is not None else []
        self._block_ids: list[int] = []
        self._kvs: list[torch.Tensor] = []
        self._sums: list[tuple[int, int] | None] = []
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(cache.device))

    def add(self, block_id: int, kv: torch.Tensor, sums: tuple[int, int] | None = None) -> None:
        self._block_ids.append(block_id)
        self._kvs.append(kv)
        self._sums.append(sums)
        if len(self._block_ids) == COPY_GROUP_BLOCKS:
            self._flush()

    def finish(self) -> None:
        """Copy what is left; the compute stream then waits for every copy."""
        self._flush()
        if self.stream is not None:
            torch.cuda.current_stream(self.cache.device).wait_stream(self.stream)

    def _flush(self) -> None:
        if not self._block_ids:
            return
        if self.stream is None:
            bad = copy_blocks_from_host(self.cache, self._block_ids, self._kvs, self._sums)
        else:
            with torch.cuda.stream(self.stream):
                bad = copy_blocks_from_host(self.cache, self._block_ids, self._kvs, self._sums)
        if bad is not None:
            self.checks.append((self._block_ids, bad))
        self._block_ids, self._kvs, self._sums = [], [], []
