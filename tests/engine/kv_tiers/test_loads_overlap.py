"""Loads from the disk tier go on while other requests step: a request decoding is not held up
by another's load, a load can be aborted, and two questions on one document read its files
once. The disk's reads are held at a gate here, so the order of events is the test's."""

from __future__ import annotations

import threading
import time

import pytest

from app.kv_cache_files import document_cache_tag
from engine import LLMEngine, SamplingParams
from tests.engine.kv_tiers.conftest import GREEDY, document, question, tiered_engine

TAG = document_cache_tag(7)
HANG_S = 60  # a gate never opened or a step that never comes: a hang, not slowness


class GatedReads:
    """Holds the disk tier's reads of an engine until open(); counts them."""

    def __init__(self, engine: LLMEngine) -> None:
        self.disk = engine._main.tiers.disk
        self._read = self.disk.read
        self.gate = threading.Event()
        self.num_reads = 0
        self._lock = threading.Lock()
        self.disk.read = self._gated

    def _gated(self, *args, **kwargs):
        with self._lock:
            self.num_reads += 1
        assert self.gate.wait(HANG_S), "the test never opened the gate"
        return self._read(*args, **kwargs)

    def open(self) -> None:
        self.gate.set()


def write_document(llama, folder) -> list[int]:
    """One document's blocks written to a disk folder by an engine since closed."""
    doc = document(300, 21)
    writer = tiered_engine(llama, kv_disk_tier_dir=folder)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    return doc


@pytest.fixture
def restarted(llama, tmp_path):
    """An engine over a disk folder that holds one document's blocks (written by another)."""
    doc = write_document(llama, tmp_path)
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    yield engine, doc
    engine.close()


def _run_until_done(engine: LLMEngine, request_ids: set[int]) -> dict:
    results = {}
    for _ in range(10_000):
        for result in engine.step():
            results[result.request_id] = result
        if request_ids <= results.keys():
            return results
    raise AssertionError("the requests never finished")


def test_a_request_decodes_while_another_loads_from_disk(restarted, cold_engine) -> None:
    engine, doc = restarted
    gated = GatedReads(engine)
    decoding = []
    talker = engine.add_request(
        document(20, 22),
        SamplingParams(max_new_tokens=30),
        on_token=lambda token_id, _: decoding.append(token_id),
    )
    while not decoding:
        engine.step()
    loader = engine.add_request(question(doc, 2), GREEDY, cache_tag=TAG)
    scheduler = engine._main.scheduler
    before = len(decoding)
    for _ in range(8):
        engine.step()
    # Eight steps of the talker while the other's reads are held: it was not made to wait.
    assert len(decoding) >= before + 7
    assert [seq.request_id for seq in scheduler.loading] == [loader]
    deadline = time.monotonic() + HANG_S
    while gated.num_reads == 0:  # the pool's threads have the reads (and wait at the gate)
        assert time.monotonic() < deadline, "no read reached the disk"
        time.sleep(0.01)
    gated.open()
    results = _run_until_done(engine, {talker, loader})
    stats = results[loader].stats.to_dict()
    assert stats["disk_tier_num_tokens"] == 288 and stats["num_computed_prompt_tokens"] == 19
    assert results[loader].token_ids == cold_engine.generate(question(doc, 2), GREEDY).token_ids
    assert (
        results[talker].token_ids
        == cold_engine.generate(document(20, 22), SamplingParams(max_new_tokens=30)).token_ids
    )


def test_a_load_aborted_midway_leaves_the_cache_whole(restarted, cold_engine) -> None:
    engine, doc = restarted
    gated = GatedReads(engine)
    blocks = engine._main.blocks
    free = blocks.num_free_blocks
    loader = engine.add_request(question(doc, 3), GREEDY, cache_tag=TAG)
    engine.add_request(document(20, 23), SamplingParams(max_new_tokens=30))  # keeps it busy
    for _ in range(3):
        engine.step()
    assert [seq.request_id for seq in engine._main.scheduler.loading] == [loader]
    assert engine.abort(loader) is not None
    gated.open()
    while engine.has_unfinished_requests():
        engine.step()
    # The load's blocks were released (held none, leaked none): every block is free again.
    assert blocks.num_free_blocks == free
    assert not engine._main.tiers.has_loads()
    again = engine.generate(question(doc, 4), GREEDY, cache_tag=TAG)
    assert again.stats.num_cached_tokens == 288
    assert again.token_ids == cold_engine.generate(question(doc, 4), GREEDY).token_ids


def test_two_questions_on_one_document_read_its_files_once(restarted, cold_engine) -> None:
    engine, doc = restarted
    gated = GatedReads(engine)
    first = engine.add_request(question(doc, 5), GREEDY, cache_tag=TAG)
    second = engine.add_request(question(doc, 6), GREEDY, cache_tag=TAG)
    engine.step()
    assert {seq.request_id for seq in engine._main.scheduler.loading} == {first, second}
    gated.open()
    results = _run_until_done(engine, {first, second})
    # The document's 18 full blocks and the block after them (the first question's, a miss),
    # each looked for once: the second question waited for the first one's load.
    assert gated.num_reads == 19
    loaded = [results[r].stats.to_dict()["disk_tier_num_tokens"] for r in (first, second)]
    assert loaded == [288, 0]  # the second found them in the cache, loaded by the first
    assert results[second].stats.num_cached_tokens == 288
    for request_id, seed in ((first, 5), (second, 6)):
        expected = cold_engine.generate(question(doc, seed), GREEDY).token_ids
        assert results[request_id].token_ids == expected


def test_aborting_a_follower_and_a_loaded_unallocated_request_leaks_nothing(restarted) -> None:
    engine, doc = restarted
    gated = GatedReads(engine)
    blocks, scheduler, tiers = engine._main.blocks, engine._main.scheduler, engine._main.tiers
    free = blocks.num_free_blocks
    leader = engine.add_request(question(doc, 5), GREEDY, cache_tag=TAG)
    follower = engine.add_request(question(doc, 6), GREEDY, cache_tag=TAG)
    busy = engine.add_request(document(20, 23), SamplingParams(max_new_tokens=40))
    engine.step()
    assert {s.request_id for s in scheduler.loading} == {leader, follower}
    engine.abort(follower)
    assert tiers._loads[leader].followers == []
    gated.open()
    for _ in range(200):
        engine.step()
        if tiers._loads.get(leader) is None or tiers._loads[leader].ended:
            break
    engine.abort(leader)  # loaded (ended) or already allocated
    while engine.has_unfinished_requests():
        engine.step()
    assert blocks.num_free_blocks == free and not tiers._loads and not tiers._loading_hashes
    assert busy is not None


def test_a_third_load_waits_for_one_to_end(llama, tmp_path, cold_engine) -> None:
    """Three questions on three documents after a restart: two loads read at once (MAX_DISK_LOADS),
    the third starts when one ends, and every answer is the cold one."""
    from engine.kv_tiers.loads_up import MAX_DISK_LOADS

    assert MAX_DISK_LOADS == 2
    docs = [document(300, 40 + index) for index in range(3)]
    writer = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    for index, doc in enumerate(docs):
        writer.generate(question(doc, 10 + index), GREEDY, cache_tag=document_cache_tag(40 + index))
    writer.close()
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    gated = GatedReads(engine)
    try:
        tiers, scheduler = engine._main.tiers, engine._main.scheduler
        requests = [
            engine.add_request(
                question(doc, 20 + index), GREEDY, cache_tag=document_cache_tag(40 + index)
            )
            for index, doc in enumerate(docs)
        ]
        engine.step()
        assert {seq.request_id for seq in scheduler.loading} == set(requests)
        assert list(tiers._loads) == requests[:2]  # the third waits for one to end
        assert [seq.request_id for seq in tiers._disk_waiters] == [requests[2]]
        gated.open()
        results = _run_until_done(engine, set(requests))
        for index, request_id in enumerate(requests):
            stats = results[request_id].stats.to_dict()
            assert stats["disk_tier_num_tokens"] == 288
            expected = cold_engine.generate(question(docs[index], 20 + index), GREEDY).token_ids
            assert results[request_id].token_ids == expected
        assert not tiers.has_loads() and not scheduler.loading
    finally:
        gated.open()  # a failed check above leaves no read waiting at the gate
        engine.close()


# MAX_DISK_LOADS under a review's cases (each failed before the mend): a held-back load starts
# when any load ends, the freed slot goes to the highest priority, and a load counts against the
# bound unless all of it is in the CPU tier. The reads of chosen blocks are held at gates.


class BlockGates:
    """Holds the disk reads of chosen blocks (by their tokens) until their gate opens."""

    def __init__(self, engine: LLMEngine) -> None:
        self.disk = engine._main.tiers.disk
        self._read = self.disk.read
        self.gates: dict[tuple[int, ...], threading.Event] = {}
        self.disk.read = self._gated

    def gate_last_block(self, doc: list[int]) -> threading.Event:
        """The gate of doc's last full block: its load does not end until it opens."""
        last = len(doc) // BLOCK - 1
        event = threading.Event()
        self.gates[tuple(doc[last * BLOCK : (last + 1) * BLOCK])] = event
        return event

    def _gated(self, block_hash, token_ids, *args, **kwargs):
        event = self.gates.get(tuple(token_ids))
        if event is not None:
            assert event.wait(HANG_S), "the test never opened the gate"
        return self._read(block_hash, token_ids, *args, **kwargs)

    def open_all(self) -> None:
        for event in self.gates.values():
            event.set()


BLOCK = 16


def _restarted_with(llama, folder, seeds: tuple[int, ...], **options):
    docs = [document(300, seed) for seed in seeds]
    writer = tiered_engine(llama, kv_disk_tier_dir=folder)
    for doc, seed in zip(docs, seeds, strict=True):
        writer.generate(question(doc, seed), GREEDY, cache_tag=document_cache_tag(seed))
    writer.close()
    return docs, tiered_engine(llama, kv_disk_tier_dir=folder, **options)


def _step_until(engine: LLMEngine, request_id: int, max_steps: int) -> bool:
    for _ in range(max_steps):
        if any(result.request_id == request_id for result in engine.step()):
            return True
    return False


def _reading(tiers) -> list[int]:
    return [request_id for request_id, load in tiers._loads.items() if not load.ended]


def test_a_held_back_load_starts_when_either_load_ends(llama, tmp_path) -> None:
    seeds = (50, 51, 52)
    docs, engine = _restarted_with(llama, tmp_path, seeds)
    gates = BlockGates(engine)
    gates.gate_last_block(docs[0])  # the first load does not end while this is closed
    try:
        ids = [
            engine.add_request(question(doc, 60 + i), GREEDY, cache_tag=document_cache_tag(seed))
            for i, (doc, seed) in enumerate(zip(docs, seeds, strict=True))
        ]
        engine.step()  # two loads start; the third waits (MAX_DISK_LOADS)
        assert _step_until(engine, ids[1], 200), "the second question never finished"
        # One load reads now: the third's starts, and it ends while the first still waits.
        assert _step_until(engine, ids[2], 200), _reading(engine._main.tiers)
    finally:
        gates.open_all()
        engine.close()


def test_a_freed_disk_slot_goes_to_the_higher_priority(llama, tmp_path) -> None:
    seeds = (70, 71, 72, 73)
    docs, engine = _restarted_with(llama, tmp_path, seeds)
    gates = BlockGates(engine)
    first = gates.gate_last_block(docs[0])
    for doc in docs[1:]:
        gates.gate_last_block(doc)  # the other loads do not end
    try:
        tiers = engine._main.tiers
        tags = [document_cache_tag(seed) for seed in seeds]
        first_id = engine.add_request(question(docs[0], 80), GREEDY, cache_tag=tags[0])
        engine.add_request(question(docs[1], 81), GREEDY, cache_tag=tags[1])
        engine.step()
        low = engine.add_request(question(docs[2], 82), GREEDY, cache_tag=tags[2])
        engine.step()
        high = engine.add_request(question(docs[3], 83), GREEDY, cache_tag=tags[3], priority=1)
        engine.step()
        assert [seq.request_id for seq in tiers._disk_waiters] == [low, high]
        first.set()  # the first load ends: one disk slot frees
        assert _step_until(engine, first_id, 200)
        assert high in _reading(tiers) and low not in _reading(tiers)
    finally:
        gates.open_all()
        engine.close()


def test_a_load_counts_against_the_bound_unless_all_of_it_is_in_the_cpu_tier(
    llama, tmp_path
) -> None:
    from engine.block_manager import NO_PARENT_HASH, compute_block_hash
    from engine.kv_tiers.loads_up import MAX_DISK_LOADS

    seeds = (90, 91, 92)
    docs, engine = _restarted_with(llama, tmp_path, seeds, kv_cpu_tier_bytes=1 << 20)
    tiers = engine._main.tiers
    # Only the third document's first block in the CPU tier: the rest of it is on disk.
    token_ids = tuple(docs[2][:BLOCK])
    block_hash = compute_block_hash(token_ids, NO_PARENT_HASH)
    tiers.cpu.put(block_hash, token_ids, tiers._read_disk(block_hash, token_ids, None).kv)
    gates = BlockGates(engine)
    for doc in docs:
        gates.gate_last_block(doc)
    try:
        for i, (doc, seed) in enumerate(zip(docs, seeds, strict=True)):
            engine.add_request(question(doc, 95 + i), GREEDY, cache_tag=document_cache_tag(seed))
        engine.step()
        assert len(_reading(tiers)) == MAX_DISK_LOADS
        assert len(tiers._disk_waiters) == 1
    finally:
        gates.open_all()
        engine.close()


def _doc_keys(tokens: list[int]) -> list[tuple[int, tuple[int, ...]]]:
    """(chain hash, tokens) of the full blocks of a prompt."""
    from engine.block_manager import NO_PARENT_HASH, compute_block_hash

    keys, parent = [], NO_PARENT_HASH
    for start in range(0, len(tokens) - BLOCK + 1, BLOCK):
        token_ids = tuple(tokens[start : start + BLOCK])
        parent = compute_block_hash(token_ids, parent)
        keys.append((parent, token_ids))
    return keys


def test_a_load_from_the_cpu_tier_alone_neither_waits_nor_drops_the_waiters(
    llama, tmp_path, cold_engine
) -> None:
    """Two disk loads read, a third question waits; a fourth, asked before, whose blocks the
    CPU tier holds, loads at once, and the third still starts when a disk load ends (the
    fourth's load, ending inside start_load, took no slot and let go of no waiter)."""
    seeds = (100, 101, 102, 103)
    docs, engine = _restarted_with(llama, tmp_path, seeds, kv_cpu_tier_bytes=1 << 20)
    tiers = engine._main.tiers
    asked_before = question(docs[3], seeds[3])  # the writer's question: all its blocks on disk
    for block_hash, token_ids in _doc_keys(asked_before):
        tiers.cpu.put(block_hash, token_ids, tiers._read_disk(block_hash, token_ids, None).kv)
    gates = BlockGates(engine)
    opened = [gates.gate_last_block(docs[0]), gates.gate_last_block(docs[1])]
    try:
        ids = [
            engine.add_request(question(doc, 110 + i), GREEDY, cache_tag=document_cache_tag(seed))
            for i, (doc, seed) in enumerate(zip(docs[:3], seeds[:3], strict=True))
        ]
        engine.step()
        assert [seq.request_id for seq in tiers._disk_waiters] == [ids[2]]
        cpu_only = engine.add_request(asked_before, GREEDY, cache_tag=document_cache_tag(seeds[3]))
        assert _step_until(engine, cpu_only, 200)
        assert [seq.request_id for seq in tiers._disk_waiters] == [ids[2]]
        for gate in opened:
            gate.set()
        results = _run_until_done(engine, set(ids))
        for index, request_id in enumerate(ids):
            expected = cold_engine.generate(question(docs[index], 110 + index), GREEDY)
            assert results[request_id].token_ids == expected.token_ids
        assert not tiers._disk_waiters and not engine._main.scheduler.loading
    finally:
        gates.open_all()
        engine.close()


def test_a_question_whose_document_is_in_the_cpu_tier_is_not_held_back(llama, tmp_path) -> None:
    """Its document's blocks all in the CPU tier, its last block (document and question) in no
    tier: its load reads nothing from disk, so two disk loads reading do not hold it back."""
    seeds = (130, 131, 132)
    docs, engine = _restarted_with(llama, tmp_path, seeds, kv_cpu_tier_bytes=1 << 20)
    tiers = engine._main.tiers
    for block_hash, token_ids in _doc_keys(docs[2]):
        tiers.cpu.put(block_hash, token_ids, tiers._read_disk(block_hash, token_ids, None).kv)
    gates = BlockGates(engine)
    for doc in docs[:2]:
        gates.gate_last_block(doc)
    try:
        tags = [document_cache_tag(seed) for seed in seeds]
        for i in range(2):
            engine.add_request(question(docs[i], 140 + i), GREEDY, cache_tag=tags[i])
        engine.step()
        third = engine.add_request(question(docs[2], 142), GREEDY, cache_tag=tags[2])
        engine.step()
        # Not held back (its miss is then looked for on disk, behind the held reads here).
        assert third not in [seq.request_id for seq in tiers._disk_waiters]
        scheduler = engine._main.scheduler
        assert third in [seq.request_id for seq in scheduler.loading + scheduler.running]
    finally:
        gates.open_all()
        engine.close()
