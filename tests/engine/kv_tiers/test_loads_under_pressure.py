"""Loads from the lower tiers under pressure: a tight cache, priorities, a step scheduled ahead,
a document deleted mid-load, a damaged file whose block is never placed, an engine with nothing
to run but a load. Each case was a deadlock, a crash, a busy loop or a wrong answer in a first
version of the overlapped loads (a review reproduced them); each docstring says what went wrong
then, the test what must hold."""

from __future__ import annotations

import threading

import pytest

from engine import SamplingParams
from tests.engine.kv_tiers.conftest import GREEDY, document, question, tiered_engine
from tests.engine.kv_tiers.test_loads_overlap import TAG, GatedReads, write_document

BLOCK_SIZE = 16
BLOCK_BYTES = BLOCK_SIZE * 512  # the tiny Llama's KV block


def _finish_both(engine, first: int, second: int) -> None:
    """Step until both requests are done; a deadlock (nothing moves) fails with the queues."""
    scheduler, done = engine._main.scheduler, set()
    for _ in range(2_000):
        done |= {result.request_id for result in engine.step()}
        if {first, second} <= done:
            return
    blocks = engine._main.blocks
    raise AssertionError(
        f"deadlock: waiting={[s.request_id for s in scheduler.waiting]} "
        f"running={[s.request_id for s in scheduler.running]} "
        f"loading={[s.request_id for s in scheduler.loading]} "
        f"free={blocks.num_free_blocks}/{blocks.num_blocks}"
    )


@pytest.fixture
def small_restarted(llama, tmp_path):
    """A restarted engine with a 30-block cache over a folder holding one document (18 blocks)."""
    doc = write_document(llama, tmp_path)
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path, max_kv_cache_bytes=30 * BLOCK_BYTES)
    assert engine._main.blocks.num_blocks == 30
    yield engine, doc
    engine.close()


def test_a_loaded_request_and_a_higher_priority_one_that_needs_its_blocks_both_finish(
    small_restarted,
) -> None:
    """L loads 18 blocks from disk; H (higher priority, 13 blocks) arrives meanwhile. Alone each
    fits the 30-block cache. When L's load ends L is queued behind H, still holding its 18 blocks,
    so H never fits (12 free) and L is never allocated: nothing runs, nothing is freed."""
    engine, doc = small_restarted
    gated = GatedReads(engine)
    scheduler = engine._main.scheduler
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG)  # 307 tokens, 20 blocks
    engine.step()
    assert [seq.request_id for seq in scheduler.loading] == [loader]
    urgent = engine.add_request(document(200, 30), GREEDY, priority=1)  # 13 blocks
    gated.open()
    _finish_both(engine, loader, urgent)


@pytest.fixture
def restarted_one_seq(llama, tmp_path):
    """A restarted engine that runs one request at a time, over a folder holding one document."""
    doc = write_document(llama, tmp_path)
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path, max_num_seqs=1)
    yield engine, doc
    engine.close()


def test_a_load_ending_never_preempts_a_request_whose_token_is_in_flight(
    restarted_one_seq,
) -> None:
    """The pipeline schedules ahead only when can_schedule_without_preemption(); that is asked
    before schedule() runs advance(), which may requeue a higher-priority request (or import
    blocks). Here the load's end puts L (priority 1) first, and R (its last token still in
    flight, unread) is preempted: reading that token then ends R, which is in `waiting`, and
    Scheduler.finish raises ValueError (list.remove)."""
    engine, doc = restarted_one_seq
    gated = GatedReads(engine)
    scheduler = engine._main.scheduler
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG, priority=1)
    talker = engine.add_request(document(20, 22), SamplingParams(max_new_tokens=5))
    engine.step()
    assert [seq.request_id for seq in scheduler.loading] == [loader]
    (seq,) = scheduler.running
    assert seq.request_id == talker
    while not seq.has_all_completion_tokens:  # its last token launched, not read yet
        engine.step()
    gated.open()
    tiers = engine._main.tiers
    load = tiers._loads[loader]
    for future in [f for _, _, f in load.reads._window if f is not None]:
        future.result(timeout=30)
    done = {}
    for _ in range(200):  # raised ValueError here: the talker finished while in `waiting`
        for result in engine.step():
            done[result.request_id] = result
        if {loader, talker} <= done.keys():
            break
    assert {loader, talker} <= done.keys()
    assert len(done[talker].token_ids) == 5


def test_a_block_read_but_not_placed_never_reaches_the_cpu_tier_unchecked(
    llama, cold_engine, tmp_path, monkeypatch
) -> None:
    """With kv_device_checksums, PrefixReads.ready() puts a disk block into the CPU tier before
    its sums are checked (they are checked only after the copy up). When its import fails
    (NoFreeBlocksError: other requests took the room) the load stops, _end pops its sums, and
    the damaged copy stays in the CPU tier: the next load takes it from there with no check."""
    from engine.block_manager import NoFreeBlocksError
    from tests.engine.kv_tiers.test_block_sums import _engine
    from tests.engine.kv_tiers.test_engine_tiers import _block_hashes

    doc, damaged = document(300, 31), 5
    writer = _engine(llama, tmp_path, device_sums=True)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    reader = _engine(llama, tmp_path, device_sums=True)
    tiers = reader._main.tiers
    bad_hash = _block_hashes(doc)[damaged]
    path = tmp_path / tiers.disk.relative_path(bad_hash)
    data = bytearray(path.read_bytes())
    for offset in range(100, 4000, 7):  # the payload only: the read itself finds nothing wrong
        data[-offset] ^= 0x40
    path.write_bytes(bytes(data))

    imports = {"count": 0}
    import_block = tiers.blocks.import_block

    def full_at_the_damaged_block(block_hash, token_ids):
        imports["count"] += 1
        if block_hash == bad_hash and imports["count"] == damaged + 1:
            raise NoFreeBlocksError("the room went to other requests")
        return import_block(block_hash, token_ids)

    monkeypatch.setattr(tiers.blocks, "import_block", full_at_the_damaged_block)
    first = reader.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert first.stats.tier_tokens("disk") == damaged * BLOCK_SIZE  # stopped at the full cache
    monkeypatch.undo()
    assert tiers.disk.counts.num_corrupt_dropped == 0  # nobody checked the damaged block
    # The device cache forgets what nobody uses (as under memory pressure): the next question on
    # the document loads it from the CPU tier, the damaged block included, with no check.
    reader.drop_device_prefix_cache()
    second = reader.generate(question(doc, 3), GREEDY, cache_tag=TAG)
    loaded = second.stats.tier_tokens("cpu") + second.stats.tier_tokens("disk")
    assert second.token_ids == cold_engine.generate(question(doc, 3), GREEDY).token_ids, loaded
    reader.close()


def test_a_document_forgotten_while_its_blocks_load_stays_out_of_the_caches(
    llama, tmp_path
) -> None:
    """forget_cache_tag() between two steps of a load (the loop's inbox is read between steps):
    the blocks read before it are still placed afterwards, into the device cache and the CPU
    tier, and listed under the forgotten tag again: the deleted document's KV is served on."""
    from tests.engine.kv_tiers.test_engine_tiers import _block_hashes

    doc = write_document(llama, tmp_path)
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_cpu_tier_bytes=1 << 20)
    tiers = engine._main.tiers
    gated = GatedReads(engine)
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG)
    engine.add_request(document(20, 22), SamplingParams(max_new_tokens=30))  # keeps it busy
    engine.step()
    assert [seq.request_id for seq in engine._main.scheduler.loading] == [loader]
    gated.open()
    for future in [f for _, _, f in tiers._loads[loader].reads._window if f is not None]:
        future.result(timeout=30)  # read, not placed yet
    engine.forget_cache_tag(TAG)  # the document is deleted
    while engine.has_unfinished_requests():
        engine.step()
    engine.abort(loader)
    hashes = _block_hashes(doc)[:18]
    in_cache = [h for h in hashes if h in engine._main.blocks._hash_to_block_id]
    in_cpu = [h for h in hashes if h in tiers.cpu]
    engine.close()
    assert not in_cache and not in_cpu, (
        f"{len(in_cache)} in the cache, {len(in_cpu)} in the CPU tier"
    )


def test_a_damaged_block_of_a_document_forgotten_mid_load_fails_nothing(llama, tmp_path) -> None:
    """_check_sums reads the bad blocks' hashes from the block manager at the load's end; a
    forget between their import and that end has set them to None: disk.drop(None) raises
    (and next() over `placed` would raise StopIteration): the step fails."""
    from tests.engine.kv_tiers.test_block_sums import _engine
    from tests.engine.kv_tiers.test_engine_tiers import _block_hashes

    doc, damaged = document(300, 31), 4
    writer = _engine(llama, tmp_path, device_sums=True)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    engine = _engine(llama, tmp_path, device_sums=True)
    tiers = engine._main.tiers
    hashes = _block_hashes(doc)
    path = tmp_path / tiers.disk.relative_path(hashes[damaged])
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x40
    path.write_bytes(bytes(data))
    last = threading.Event()  # holds the read of the document's last block only
    read = tiers.disk.read

    def gated(block_hash, *args, **kwargs):
        if block_hash == hashes[17]:
            assert last.wait(60)
        return read(block_hash, *args, **kwargs)

    tiers.disk.read = gated
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG)
    engine.add_request(document(20, 22), SamplingParams(max_new_tokens=30))  # keeps it busy
    engine.step()
    load = tiers._loads[loader]
    for _ in range(200):
        engine.step()  # places blocks 0..16 as they come (the damaged one's check deferred)
        if len(load.placed) == 17:
            break
    assert len(load.placed) == 17 and not load.ended
    engine.forget_cache_tag(TAG)
    last.set()
    while engine.has_unfinished_requests():  # the load stops; nothing fails
        engine.step()
    assert not tiers._loading_hashes and not tiers.has_loads()
    in_cache = [h for h in hashes[:18] if h in engine._main.blocks._hash_to_block_id]
    assert in_cache == []  # the deleted document's blocks left the cache
    again = engine.add_request(question(doc, 3), GREEDY)
    for _ in range(500):
        if any(r.request_id == again for r in engine.step()):
            return
    raise AssertionError(
        f"never finished: loading={[s.request_id for s in engine._main.scheduler.loading]}"
    )


def test_an_engine_whose_only_waiting_request_waits_for_a_load_does_not_spin(
    small_restarted,
) -> None:
    """Nothing running, one request loading, another waiting for room the load reserves: the
    scheduler's advance() gets wait=False (waiting is not empty), wait_time() is 0 after the
    admission window, and the engine's loop (here LLMEngine._run_until_done's) spins on empty
    steps for as long as the reads take, instead of waiting for them in slices."""
    import time

    engine, doc = small_restarted
    gated = GatedReads(engine)
    scheduler = engine._main.scheduler
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG)
    engine.step()
    assert [seq.request_id for seq in scheduler.loading] == [loader]
    engine.add_request(document(200, 30), GREEDY)  # 13 blocks: not with the 19 the load reserves
    num_steps, until = 0, time.monotonic() + 0.5
    while time.monotonic() < until:  # _run_until_done's loop
        wait = engine.wait_time()
        if wait > 0:
            time.sleep(wait)
        engine.step()
        num_steps += 1
    gated.open()
    assert not scheduler.running and len(scheduler.waiting) == 1
    assert num_steps <= 20, f"{num_steps} empty steps in 0.5 s: a busy loop"


def test_a_request_decoding_past_the_room_a_load_left_does_not_deadlock_with_it(
    small_restarted,
) -> None:
    """No priorities: R decodes while L's 18 blocks come up from disk into a tight cache. The
    imports take the free blocks R's decode then needs: R is preempted and queued first (it is
    older), needs 13 blocks with 12 free, while L, behind it, holds its 18 until allocated."""
    engine, doc = small_restarted
    scheduler = engine._main.scheduler
    talker = engine.add_request(document(150, 40), SamplingParams(max_new_tokens=100))
    while not scheduler.running or not scheduler.running[0].is_decoding:
        engine.step()
    gated = GatedReads(engine)  # the disk is slow: R decodes meanwhile
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG)  # 20 blocks, 20 free
    engine.step()
    assert [seq.request_id for seq in scheduler.loading] == [loader]
    while scheduler.running[0].num_tokens < 180:  # R takes 2 more blocks: 18 free
        engine.step()
    gated.open()
    _finish_both(engine, loader, talker)


def test_forget_mid_load_of_an_untagged_request_keeps_the_deleted_kv_out(llama, tmp_path) -> None:
    """_advance stops a load only when the *loading request's* tag is forgotten. forget(TAG)
    drops every block of TAG's document (hashes are tag-independent, the folder's listing is
    used for exactly this), but a load of the same blocks by an untagged request (or one under
    another tag) goes on placing what it had read: the deleted KV is back in the device cache
    and the CPU tier after the forget. (The device cache is not asserted: an untagged request
    may compute the prefix itself; but untagged requests never put KV into the CPU tier.)"""
    from tests.engine.kv_tiers.test_engine_tiers import _block_hashes

    doc = write_document(llama, tmp_path)
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_cpu_tier_bytes=1 << 20)
    tiers = engine._main.tiers
    gated = GatedReads(engine)
    loader = engine.add_request(question(doc, 2), GREEDY)  # no tag
    engine.add_request(document(20, 22), SamplingParams(max_new_tokens=30))  # keeps it busy
    engine.step()
    assert [seq.request_id for seq in engine._main.scheduler.loading] == [loader]
    gated.open()
    for future in [f for _, _, f in tiers._loads[loader].reads._window if f is not None]:
        future.result(timeout=30)  # read, not placed yet
    engine.forget_cache_tag(TAG)  # the document is deleted
    results = {}
    while engine.has_unfinished_requests():
        results.update({r.request_id: r for r in engine.step()})
    hashes = _block_hashes(doc)[:18]
    in_cpu = [h for h in hashes if h in tiers.cpu]
    from_disk = results[loader].stats.tier_tokens("disk")
    engine.close()
    assert not in_cpu and from_disk == 0, (
        f"{len(in_cpu)} deleted blocks in the CPU tier, {from_disk} tokens served from disk"
    )


def test_a_higher_priority_arrival_that_cannot_fit_during_a_load_preempts_nobody(
    small_restarted,
) -> None:
    """_preempt_for_priority now asks _fits (which reserves every block the loads may still
    take). R (priority 0, 3 blocks) decodes while L's 19 blocks load; H (priority 1, 13 blocks)
    arrives. H fits the free blocks (27) but not with the reserve (13 + 19 > 27), and not even
    with R gone (13 + 19 > 30): R is preempted all the same, for nothing. H still cannot be
    admitted, R is queued behind it, and R's decoding stops for the whole load (the very thing
    the overlapped loads are for)."""
    engine, doc = small_restarted
    scheduler = engine._main.scheduler
    talker = engine.add_request(document(40, 40), SamplingParams(max_new_tokens=200))
    while not scheduler.running or not scheduler.running[0].is_decoding:
        engine.step()
    gated = GatedReads(engine)
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG)
    engine.step()
    assert [seq.request_id for seq in scheduler.loading] == [loader]
    engine.add_request(document(200, 30), GREEDY, priority=1)  # 13 blocks
    (r,) = [s for s in scheduler.running + scheduler.waiting if s.request_id == talker]
    for _ in range(5):
        engine.step()
    preempted = r.num_preemptions
    running = [s.request_id for s in scheduler.running]
    gated.open()
    while engine.has_unfinished_requests():
        engine.step()
    assert preempted == 0 and running == [talker], (
        f"R preempted {preempted}x while H could not be admitted anyway; running={running}"
    )


def test_a_load_that_ends_inside_start_load_with_a_damaged_block_does_not_crash_admission(
    llama, cold_engine, tmp_path
) -> None:
    """Admission checks _fits, then start_load, then allocate. When the reads end inside
    start_load (every future already done: a short rest on a fast disk; made certain here with
    an inline read pool), _end's device check drops the damaged block: the blocks from it on are
    held by the load but are no hits any more, so allocate needs more free blocks than _fits
    counted and raises NoFreeBlocksError from schedule(), the request already off `waiting`
    (Scheduler._requeue's follower path has the same order: can_allocate, then start_load)."""
    from concurrent.futures import Future

    from tests.engine.kv_tiers.test_engine_tiers import _block_hashes

    doc, damaged = document(300, 31), 5
    writer = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_device_checksums=True)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    engine = tiered_engine(
        llama,
        kv_disk_tier_dir=tmp_path,
        kv_device_checksums=True,
        max_kv_cache_bytes=20 * 16 * 512,  # exactly the question's 20 blocks
    )
    tiers = engine._main.tiers
    path = tmp_path / tiers.disk.relative_path(_block_hashes(doc)[damaged])
    data = bytearray(path.read_bytes())
    for offset in range(100, 4000, 7):
        data[-offset] ^= 0x40
    path.write_bytes(bytes(data))

    class Inline:
        def submit(self, fn, *args):
            future = Future()
            future.set_result(fn(*args))
            return future

        def shutdown(self, wait: bool = True) -> None:
            pass

    tiers._pool = Inline()
    result = engine.generate(question(doc, 2), GREEDY, cache_tag=TAG)  # raised NoFreeBlocksError
    assert result.token_ids == cold_engine.generate(question(doc, 2), GREEDY).token_ids
    engine.close()
