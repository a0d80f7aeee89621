"""Host memory for KV blocks, cut from slabs: one pinned allocation per SLAB_BLOCKS blocks, pinned
ahead of need by a background thread.

Pinning memory (cudaHostAlloc) costs about a millisecond a call and the driver serializes the
calls across threads: one pinned tensor per 2 MB block held the H200's copies to the lower tiers
at about 2 GB/s, and the write-behind then cost the first answer as much as the prefill itself
(bench/results/kv_tiers_h200.md). A block here is a view of its slab; the slab goes back to
torch's pinned-memory cache when its last block is dropped (the views share its storage), and a
new slab of the same size is taken from that cache without pinning again. A slab stays whole
while any of its blocks is kept, so a tier may hold up to one slab more than its blocks' bytes
per run of blocks kept out of order; blocks of one document are written and dropped together,
so in practice it is about one slab.

Slabs cut while a 64 MB slab was pinned on the engine's thread still cost a 128K-token first
answer +81% on an H100 (17 GB of KV pinned during its prefill; bench/results/kv_tiers_h100.md).
So a pinner thread pins `pool_bytes` (the CPU tier's cap and some room for blocks on their way
to disk) from the start, as a KV offload cache reserves its host buffer at start-up, and then
keeps `ahead_slabs` ready; take() pins on the caller's thread only when none is ready.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass

import torch

SLAB_BLOCKS = 32  # 64 MB at the 8B shape in bf16 (2 MB a block of 16 tokens)
AHEAD_BYTES = 1 << 30  # slabs kept ready after the pool is pinned: the KV of a long prefill chunk


@dataclass
class HostCounters:
    num_slabs_ready: int = 0  # taken ready: pinned ahead by the pinner
    num_slabs_on_demand: int = 0  # allocated on the taking thread: none was ready
    on_demand_seconds: float = 0.0
    pinner_seconds: float = 0.0  # the pinner thread's time allocating


class HostBlocks:
    def __init__(
        self,
        block_shape: tuple[int, ...],
        dtype: torch.dtype,
        *,
        pinned: bool,
        slab_blocks: int = SLAB_BLOCKS,
        pool_bytes: int = 0,
        ahead_bytes: int = 0,
    ) -> None:
        """pool_bytes and ahead_bytes: what the pinner thread allocates from the start and keeps
        ready afterwards (both 0: no thread, every slab allocated by take())."""
        self.block_shape = block_shape
        self.dtype = dtype
        self.pinned = pinned
        self.slab_blocks = slab_blocks
        self.counters = HostCounters()
        slab_bytes = slab_blocks * math.prod(block_shape) * dtype.itemsize
        self._pool_slabs = math.ceil(pool_bytes / slab_bytes)
        self._ahead_slabs = math.ceil(ahead_bytes / slab_bytes)
        # Guards the slab being cut, the ready slabs and the counters: the read pool's threads
        # take blocks too. The pinner waits on it for a slab to be taken.
        self._lock = threading.Condition()
        self._slab: torch.Tensor | None = None
        self._next = 0
        self._ready: deque[torch.Tensor] = deque()
        self._closed = False
        self._pool_done = threading.Event()
        self._pinner: threading.Thread | None = None
        if self._pool_slabs or self._ahead_slabs:
            self._pinner = threading.Thread(target=self._pin, name="kv-host-pinner", daemon=True)
            self._pinner.start()
        else:
            self._pool_done.set()

    def take(self) -> torch.Tensor:
        """An uninitialized host block of block_shape (pinned when `pinned`)."""
        with self._lock:
            if self._slab is None or self._next == self.slab_blocks:
                if self._ready:
                    self._slab = self._ready.popleft()
                    self.counters.num_slabs_ready += 1
                    self._lock.notify()
                else:
                    started = time.perf_counter()
                    self._slab = self._new_slab()
                    self.counters.num_slabs_on_demand += 1
                    self.counters.on_demand_seconds += time.perf_counter() - started
                self._next = 0
            block = self._slab[self._next]
            self._next += 1
            return block

    def wait_pool(self, timeout_s: float | None = None) -> bool:
        """Wait until the pool asked for at start is pinned; False if timeout_s passed first."""
        return self._pool_done.wait(timeout_s)

    def num_ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def close(self) -> None:
        """Stop the pinner; the ready slabs go back to torch's pinned-memory cache."""
        with self._lock:
            self._closed = True
            self._ready.clear()
            self._lock.notify_all()
        if self._pinner is not None:
            self._pinner.join(timeout=30.0)

    def _new_slab(self) -> torch.Tensor:
        return torch.empty(
            (self.slab_blocks, *self.block_shape), dtype=self.dtype, pin_memory=self.pinned
        )

    def _pin(self) -> None:
        num_pinned = 0
        while True:
            with self._lock:
                if num_pinned >= self._pool_slabs:
                    self._pool_done.set()
                    while not self._closed and len(self._ready) >= self._ahead_slabs:
                        self._lock.wait()
                if self._closed:
                    self._pool_done.set()
                    return
            started = time.perf_counter()
            try:
                slab = self._new_slab()  # outside the lock: takers go on meanwhile
            except RuntimeError:  # out of pinnable memory: takers allocate (or fail) themselves
                self._pool_done.set()
                return
            with self._lock:
                self.counters.pinner_seconds += time.perf_counter() - started
                if self._closed:
                    continue
                self._ready.append(slab)
                num_pinned += 1
