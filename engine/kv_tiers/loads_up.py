"""Loading a request's prompt prefix up from the lower KV tiers, overlapped with other requests'
steps: the half of TieredKVCache (tiered_cache.py) that runs before a prefill.

When the scheduler admits a request (it fits), its prompt's chain of block hashes is followed past
the device cache's hits into the CPU tier, then the disk tier (start_load). What the CPU tier
holds is placed at once. Disk reads run on a thread pool, READ_AHEAD_BLOCKS ahead, while the
request waits in the scheduler's `loading` list and the others go on stepping: before each step,
advance() imports the blocks read since the last one into free blocks of the cache, registered
under their hashes (an engine with nothing else to run waits for them, in slices). When the reads
end, the request goes back to the queue and allocate() takes its blocks like any prefix hit;
until then they are held, so nothing evicts them. Another request whose prefix is on its way up
waits for that load rather than reading the same files. On a GPU the copies run on a side
stream, which the compute stream waits for before its next step.

With kv_device_checksums, a file's sums are checked on the device after the copy up, for all of
a load's blocks at its end (one wait); a block that fails is dropped from every tier and the
request computes it and what follows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from engine.block_manager import BlockManager, NoFreeBlocksError, prefix_block_keys
from engine.kv_cache import KVCache
from engine.kv_tiers.block_file import BlockMisfit
from engine.kv_tiers.block_loads import CPU_TIER, DISK_TIER, CacheWriter, Hit, PrefixReads
from engine.kv_tiers.cache_blocks import CacheBlocks
from engine.kv_tiers.cpu_tier import CpuTier
from engine.kv_tiers.disk_tier import DiskTier
from engine.kv_tiers.disk_writer import DiskWriter
from engine.kv_tiers.host_blocks import HostBlocks
from engine.sequence import Sequence
from engine.stats import TierLoad

# An idle engine waits for a load's reads this long at a time, its copies up grouped across it.
WAIT_SLICE_S = 0.05
# Loads reading from disk at once. They share the read pool and the host's memory bandwidth
# (the bound of a load: a 128K prompt's 17 GB read at 10-14 GB/s on an H100 host), so with no
# bound each of N questions on N documents after a restart would wait for about all N loads;
# with it, the first ones come first. Two, not one: a short document's load does not wait a
# whole long one's.
MAX_DISK_LOADS = 2


@dataclass
class _Load:
    """One request's prefix on its way up from the lower tiers."""

    seq: Sequence
    reads: PrefixReads
    held: list[int]  # cache blocks of the prefix (hits, then imports), held until allocated
    loads: dict[str, TierLoad]
    waited: dict[str, float]
    num_looked: int
    keys: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    followers: list[Sequence] = field(default_factory=list)  # requests waiting for these blocks
    ended: bool = False
    # Per block placed, in key order: (hash, tier, bytes, cache block id); the checks of file
    # sums on the device still to be read (CacheWriter.checks); and the host copies of blocks
    # whose check is on the device, kept in the CPU tier only once it passed.
    placed: list[tuple[int, str, int, int]] = field(default_factory=list)
    checks: list[tuple[list[int], torch.Tensor]] = field(default_factory=list)
    unchecked: list[tuple[int, tuple[int, ...], torch.Tensor]] = field(default_factory=list)
    stopped: bool = False  # its blocks' document was forgotten: nothing more is placed


@dataclass
class _Read:
    """A block read from disk: its KV in host memory, and its file's sums when their check was
    left to the device (None: checked on the host as it was read)."""

    kv: torch.Tensor
    sums: tuple[int, int] | None


class LoadsUp:
    """The loads of a TieredKVCache, which sets these attributes (and poll, counters and
    _has): the scheduler's PrefixLoader (engine/scheduler.py)."""

    kv_cache: KVCache
    cache_blocks: CacheBlocks
    blocks: BlockManager
    cpu: CpuTier | None
    disk: DiskTier | None
    device_sums: bool
    writer: DiskWriter | None
    block_shape: tuple[int, ...]
    _dtype_name: str
    _block_bytes: int
    _host: HostBlocks
    _pool: ThreadPoolExecutor | None
    _stream: torch.cuda.Stream | None  # copies up
    _loads: dict[int, _Load]  # by request id, until the request is allocated
    _loading_hashes: dict[int, _Load]  # block hash -> the load bringing it up
    _tag_hashes: dict[str, set[int]]
    _forgotten: set[str]
    _disk_waiters: list[Sequence]  # held back by MAX_DISK_LOADS until a load ends

    def _init_loads(self) -> None:
        self._loads = {}
        self._loading_hashes = {}
        self._disk_waiters = []

    def _num_reading(self) -> int:
        return sum(1 for load in self._loads.values() if not load.ended)

    def start_load(self, seq: Sequence) -> bool:
        """Begin loading the blocks of seq's prompt prefix that the lower tiers hold into the
        cache. True: seq may be allocated now (nothing to load, or all of it loaded at once from
        the CPU tier); False: reads are under way (advance() says when they end), or another
        request's load is bringing up the same blocks (seq then waits for that load), or
        MAX_DISK_LOADS loads read already (seq waits for any load to end: advance() gives the
        waiting requests back when a load ends)."""
        earlier = self._loads.get(seq.request_id)
        if earlier is not None:
            return earlier.ended  # loaded (its blocks held), back in the queue to be allocated
        seq.tier_loads = {}
        self.poll()
        block_size = self.blocks.block_size
        keys = list(prefix_block_keys(seq, block_size))  # all but the last token's block
        held: list[int] = []
        for block_hash, token_ids in keys:
            block_id = self.blocks.cached_block_id(block_hash, token_ids)
            if block_id is None:
                break
            held.append(block_id)
        rest = keys[len(held) :]
        # A load under way may have imported blocks of this prefix that are not checked yet, or
        # be bringing up its next one: wait for it.
        leader = None
        if self._loading_hashes:
            leader = next(
                (
                    self._loading_hashes[block_hash]
                    for block_hash, _ in keys[: len(held) + 1]
                    if block_hash in self._loading_hashes
                ),
                None,
            )
        if leader is not None:
            leader.followers.append(seq)
            return False
        if not rest:
            return True
        loads = {CPU_TIER: TierLoad(), DISK_TIER: TierLoad()}
        waited = {CPU_TIER: 0.0, DISK_TIER: 0.0}
        if not self._may_hold(rest[0][0]):
            self._count_loads(seq, loads, waited, len(rest))
            return True
        if self._num_reading() >= MAX_DISK_LOADS and self._reads_disk(rest):
            # The disk's reads are shared: one more load would slow those under way as much as
            # it gains. It waits for any load to end (the waiters then try again, the highest
            # priority first).
            self._disk_waiters.append(seq)
            return False
        # Held until seq is allocated: importing (here or by other loads) and other requests'
        # allocations may evict cached blocks, never these.
        self.blocks.hold(held)
        reads = PrefixReads(
            rest,
            cpu=self.cpu,
            disk=self.disk,
            read_disk=self._read_disk,
            pool=self._pool,
            waited=waited,
            reserve=self._reserve,
            keep_in_cpu=False,  # _advance keeps them (once checked)
        )
        load = _Load(seq, reads, held, loads, waited, len(rest), keys=rest)
        self._loads[seq.request_id] = load
        for block_hash, _ in rest:
            self._loading_hashes[block_hash] = load
        self._advance(load, wait_s=0.0)
        if load.reads.ended:
            self._end(load)
            return True
        return False

    def advance(self, *, wait: bool) -> list[Sequence]:
        """Place the blocks read since the last call into the cache; the requests whose loads
        ended (and those that waited for them). With wait, waits for the first load's next
        block (the engine has nothing else to run)."""
        done: list[Sequence] = []
        wait_s = WAIT_SLICE_S if wait else 0.0
        for load in [load for load in self._loads.values() if not load.ended]:
            self._advance(load, wait_s=wait_s)
            wait_s = 0.0
            if load.reads.ended:
                done += self._hand_back(self._end(load))
        return done

    def has_loads(self) -> bool:
        """Whether reads are under way (a request waits for them)."""
        return any(not load.ended for load in self._loads.values())

    def num_blocks_loading(self) -> int:
        """Cache blocks the loads under way may still take (an upper bound)."""
        return sum(load.reads.num_left for load in self._loads.values() if not load.ended)

    def allocated(self, seq: Sequence) -> None:
        """seq was allocated (its loaded blocks are its own now), or goes back to the queue
        (they stay in the cache, free to evict): the load's holds go."""
        load = self._loads.pop(seq.request_id, None)
        if load is not None:
            self.blocks.release(load.held)

    def cancel_load(self, seq: Sequence) -> list[Sequence]:
        """seq left (aborted) while loading or before its allocation: its reads stop, its holds
        go; returns the requests that waited for its load (to be scheduled again)."""
        load = self._loads.get(seq.request_id)
        if load is None:
            for other in self._loads.values():
                if seq in other.followers:
                    other.followers.remove(seq)
            if seq in self._disk_waiters:
                self._disk_waiters.remove(seq)
            return []
        followers = [] if load.ended else self._hand_back(self._end(load))
        self.allocated(seq)
        return followers

    def _reads_disk(self, keys: list[tuple[int, tuple[int, ...]]]) -> bool:
        """Whether a load of keys would read the disk: the first of them that the CPU tier lacks
        is on disk (a load ends at its first block no tier holds)."""
        for block_hash, _ in keys:
            if self.cpu is None or block_hash not in self.cpu:
                return self.disk is not None and (
                    self.disk.knows(block_hash) or self.disk.contains(block_hash)
                )
        return False

    def _may_hold(self, block_hash: int) -> bool:
        """Whether a lower tier may hold this block: the CPU tier has it, or a file for it is in
        this process's index or on disk (another process may have written it)."""
        if self.cpu is not None and block_hash in self.cpu:
            return True
        return self.disk is not None and (
            self.disk.knows(block_hash) or self.disk.contains(block_hash)
        )

    def _advance(self, load: _Load, *, wait_s: float) -> None:
        block_size = self.blocks.block_size
        tag = load.seq.cache_tag
        if load.stopped or (tag is not None and tag in self._forgotten):
            load.reads.cancel()  # the document was deleted meanwhile: nothing more comes up
            return
        writer: CacheWriter | None = None
        until = time.perf_counter() + wait_s
        try:
            for tier, block_hash, token_ids, item in self._ready(load.reads, wait_s, until):
                started = time.perf_counter()
                kv, sums = (item.kv, item.sums) if isinstance(item, _Read) else (item, None)
                if tier == DISK_TIER and sums is None and self.cpu is not None:
                    self.cpu.put(block_hash, token_ids, kv)  # checked as it was read
                # Another request may have computed this block meanwhile: take it as it is.
                block_id = self.blocks.cached_block_id(block_hash, token_ids)
                if block_id is not None:
                    self.blocks.hold([block_id])
                    load.held.append(block_id)
                else:
                    try:
                        block_id = self.blocks.import_block(block_hash, token_ids)
                    except NoFreeBlocksError:  # other requests took the room: compute the rest
                        load.reads.cancel()
                        break
                    load.held.append(block_id)
                    if writer is None:
                        writer = CacheWriter(self.cache_blocks, self._stream, load.checks)
                    writer.add(block_id, kv, sums)
                    if sums is not None and self.cpu is not None:
                        load.unchecked.append((block_hash, token_ids, kv))
                num_bytes = kv.numel() * kv.element_size()
                load.placed.append((block_hash, tier, num_bytes, block_id))
                tier_load = load.loads[tier]
                tier_load.num_tokens += block_size
                tier_load.num_bytes += num_bytes
                tier_load.seconds += time.perf_counter() - started
                if tag is not None:
                    self._tag_hashes[tag].add(block_hash)
        finally:
            if writer is not None:
                # The compute stream waits for these copies: a block is registered in the cache
                # as it is imported, and another request may find it from its next step on.
                writer.finish()

    def _check_sums(self, load: _Load) -> None:
        """Read the device's checks of the load's file sums (one wait, once a load); drop the
        blocks that failed (cache, file) and keep the others' host copies in the CPU tier. The
        request computes the bad blocks, and its load counts only the blocks before the first."""
        checks, load.checks = load.checks, []
        unchecked, load.unchecked = load.unchecked, []
        bad: set[int] = set()
        if checks:
            flags = torch.cat([flags for _, flags in checks])
            if bool(flags.any()):
                block_ids = [block_id for ids, _ in checks for block_id in ids]
                bad_ids = {block_ids[i] for i in flags.nonzero().flatten().tolist()}
                bad = {h for h, _, _, block_id in load.placed if block_id in bad_ids}
        if bad:
            self.blocks.forget_hashes(list(bad))
            if self.cpu is not None:
                self.cpu.drop(bad)
            if self.disk is not None:
                for block_hash in bad:
                    self.disk.drop(block_hash)
            first = next(i for i, (h, *_) in enumerate(load.placed) if h in bad)
            for _, tier, num_bytes, _ in load.placed[first:]:
                load.loads[tier].num_tokens -= self.blocks.block_size
                load.loads[tier].num_bytes -= num_bytes
            del load.placed[first:]
        tag = load.seq.cache_tag
        stopped = load.stopped or (tag is not None and tag in self._forgotten)
        if self.cpu is not None and not stopped:
            for block_hash, token_ids, kv in unchecked:
                if block_hash not in bad:
                    self.cpu.put(block_hash, token_ids, kv)

    @staticmethod
    def _ready(reads: PrefixReads, wait_s: float, until: float) -> Iterator[Hit]:
        """The blocks ready now; with a wait, every block read until the reads end or `until`
        passes (then the engine's loop looks at its inbox: a new request may run meanwhile, and
        a read that hangs holds up nothing else)."""
        yield from reads.ready(wait=wait_s)
        while wait_s > 0 and not reads.ended and (left := until - time.perf_counter()) > 0:
            yield from reads.ready(wait=left)

    def _end(self, load: _Load) -> list[Sequence]:
        """The load's reads are over: the blocks whose file sums were left to the device are
        checked (one wait for the device, once a load), then its counts, and the requests that
        waited for it."""
        load.ended = True
        load.reads.cancel()
        try:
            self._check_sums(load)
        finally:  # whatever happens, no request is left following this load
            for block_hash, _ in load.keys:
                if self._loading_hashes.get(block_hash) is load:
                    del self._loading_hashes[block_hash]
        if load.loads[DISK_TIER].num_tokens and self.writer is not None:
            self.writer.submit_touches()
        self._count_loads(load.seq, load.loads, load.waited, load.num_looked)
        followers, load.followers = load.followers, []
        return [load.seq, *followers]

    def _hand_back(self, ended: list[Sequence]) -> list[Sequence]:
        """A load ended (ended: its request, then those that followed it) and its disk slot is
        free: those and the requests held back by MAX_DISK_LOADS, to be scheduled again, the
        load's own request first, then in serving order (the slot goes to the highest priority;
        those that cannot take it wait again). Not for a load that ended inside start_load: it
        took no slot."""
        waiters, self._disk_waiters = self._disk_waiters, []
        waiting = sorted(
            ended[1:] + waiters, key=lambda s: (-s.priority, s.arrival_time, s.request_id)
        )
        return [ended[0], *waiting]

    def _count_loads(
        self, seq: Sequence, loads: dict[str, TierLoad], waited: dict[str, float], num_looked: int
    ) -> None:
        block_size = self.blocks.block_size
        num_missed = num_looked * block_size
        for tier in (CPU_TIER, DISK_TIER):
            load = loads[tier]
            num_missed -= load.num_tokens
            load.num_missed_tokens = num_missed
            load.seconds += waited[tier]
            load.wait_seconds = waited[tier]
            if self._has(tier):
                counters = self.counters[tier]
                counters.num_hit_blocks += load.num_tokens // block_size
                counters.num_missed_blocks += load.num_missed_tokens // block_size
                counters.num_loaded_bytes += load.num_bytes
                counters.load_seconds += load.seconds
                seq.tier_loads[tier] = load

    def _reserve(self, block_hash: int) -> torch.Tensor | None:
        """A host block for a disk read, taken in key order, for a block this process knows the
        disk holds (a miss, as a new prompt's first block is, takes no pinned memory); None
        otherwise (a file another process wrote since: its reader takes a block itself)."""
        assert self.disk is not None
        return self._host.take() if self.disk.knows(block_hash) else None

    def _read_disk(
        self, block_hash: int, token_ids: tuple[int, ...], into: torch.Tensor | None
    ) -> _Read | None:
        """One block from disk, read straight into into (a host block reserved in key order, so
        the copy up moves a run of them at once) or a host block it takes itself (pinned on a
        GPU machine), with its file's sums when their check is the device's; runs on the read
        pool."""
        assert self.disk is not None
        kept: list[torch.Tensor] = []

        def take(dtype: str, shape: tuple[int, ...], num_bytes: int) -> memoryview:
            if dtype != self._dtype_name or shape != self.block_shape:
                raise BlockMisfit  # the namespace should make this impossible; never load one
            kv = into if into is not None else self._host.take()
            if num_bytes != kv.numel() * kv.element_size():
                raise BlockMisfit
            kept.append(kv)
            return memoryview(kv.view(-1).view(torch.uint8).numpy())

        expect = (self._dtype_name, self.block_shape, self._block_bytes)
        block = self.disk.read(block_hash, token_ids, take, expect, defer_sums=self.device_sums)
        return _Read(kept[0], block.sums) if block is not None else None

    def _stop_loads(self, tag: str, hashes: set[int]) -> None:
        """Stop the loads of a forgotten tag's blocks, by any request (tagged so or not): what
        they read and did not place yet stays out (_advance); the caller drops what they
        placed."""
        for load in self._loads.values():
            if not load.ended and (
                load.seq.cache_tag == tag or any(h in hashes for h, _ in load.keys)
            ):
                load.reads.cancel()
                load.unchecked.clear()
                load.stopped = True
