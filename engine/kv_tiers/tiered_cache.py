"""The lower KV tiers of one placement, wired to its KV cache and block manager.

Down (write-behind): after each step, the prompt blocks it registered in the prefix cache, of
requests that carry a cache tag, are copied to host memory -- on a GPU on a side stream that
waits for the step, the blocks held until the copy is done -- then kept in the CPU tier and
handed to the disk writer's thread. No request waits for any of it.

Up (load): when the scheduler admits a request (it fits), its prompt's chain of block hashes is
followed past the device cache's hits into the CPU tier, then the disk tier (start_load). What
the CPU tier holds is placed at once. Disk reads run on a thread pool, READ_AHEAD_BLOCKS ahead,
while the request waits in the scheduler's `loading` list and the others go on stepping: before
each step, advance() imports the blocks read since the last one into free blocks of the cache,
registered under their hashes (an engine with nothing else to run waits for them, in slices).
When the reads end, the request goes back to the queue and allocate() takes its blocks like any
prefix hit; until then they are held, so nothing evicts them. Another request whose prefix is
on its way up waits for that load rather than reading the same files. On a GPU the copies run
on a side stream, which the compute stream waits for before its next step.

With kv_device_checksums, a file's sums are checked on the device after the copy up, for all of
a load's blocks at its end (one wait); a block that fails is dropped from every tier and the
request computes it and what follows.

A tag forgotten (a document deleted), here or by any process sharing the disk folder (its
tombstone, looked for at most once a second), is dropped from every tier.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import torch

from engine.block_manager import BlockManager, NoFreeBlocksError, prefix_block_keys
from engine.kv_cache import KVCache
from engine.kv_tiers.block_file import BlockMisfit
from engine.kv_tiers.block_loads import (
    CPU_TIER,
    DISK_TIER,
    CacheWriter,
    Hit,
    PrefixReads,
    copy_blocks_to_host,
    make_read_pool,
)
from engine.kv_tiers.cpu_tier import CpuTier
from engine.kv_tiers.disk_tier import DiskTier, check_tag
from engine.kv_tiers.disk_writer import DiskWriter
from engine.kv_tiers.host_blocks import AHEAD_BYTES, HostBlocks, HostCounters
from engine.kv_tiers.tombstones import read_tombstone
from engine.sequence import Sequence
from engine.stats import TierLoad

FORGOTTEN_POLL_S = 1.0
# An idle engine waits for a load's reads this long at a time, its copies up grouped across it.
WAIT_SLICE_S = 0.05


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


@dataclass
class TieredKVCache:
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
        self.device = self.kv_cache.tensor.device
        self.dtype = self.kv_cache.tensor.dtype
        self._dtype_name = str(self.dtype).removeprefix("torch.")  # as block files name it
        # One block's KV: [2, L, block_size, KV, D].
        shape = self.kv_cache.tensor.shape
        self.block_shape = (shape[0], shape[1], *shape[3:])
        self._block_bytes = math.prod(self.block_shape) * self.dtype.itemsize
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
        self._loads: dict[int, _Load] = {}  # by request id, until the request is allocated
        self._loading_hashes: dict[int, _Load] = {}  # block hash -> the load bringing it up
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

    # ---- up: before a request's prefill ---------------------------------------------------

    def start_load(self, seq: Sequence) -> bool:
        """Begin loading the blocks of seq's prompt prefix that the lower tiers hold into the
        cache. True: seq may be allocated now (nothing to load, or all of it loaded at once from
        the CPU tier); False: reads are under way (advance() says when they end), or another
        request's load is bringing up the same blocks (seq then waits for it)."""
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
                done += self._end(load)
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
            return []
        followers = [] if load.ended else self._end(load)
        self.allocated(seq)
        return followers

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
                        writer = CacheWriter(self.kv_cache.tensor, self._stream, load.checks)
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
        tensor = self.kv_cache.tensor
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
            copy_blocks_to_host(tensor, block_ids, hosts, sums)
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
            copy_blocks_to_host(tensor, block_ids, hosts, sums)
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
        for load in self._loads.values():
            # A load of the tag's blocks, by any request (tagged so or not): what it read and
            # did not place yet stays out (_advance); what it placed is dropped below.
            if not load.ended and (
                load.seq.cache_tag == tag or any(h in hashes for h, _ in load.keys)
            ):
                load.reads.cancel()
                load.unchecked.clear()
                load.stopped = True
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
