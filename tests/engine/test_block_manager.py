import pytest

import engine.block_manager as block_manager_module
from engine.block_manager import BlockManager, NoFreeBlocksError, compute_block_hash
from engine.sequence import Sequence

BS = 4


def make_seq(tokens, request_id=0):
    tokens = list(tokens)
    return Sequence(request_id=request_id, token_ids=tokens, num_prompt_tokens=len(tokens))


def prefill(manager, seq):
    manager.allocate(seq)
    manager.commit_computed(seq, seq.num_tokens)


def ref_counts(manager, seq):
    return [manager.blocks[b].ref_count for b in seq.block_table]


def test_hash_is_stable_and_chained():
    assert compute_block_hash((1, 2, 3)) == compute_block_hash([1, 2, 3])
    assert compute_block_hash((1, 2, 3), 5) != compute_block_hash((1, 2, 3), 6)
    assert compute_block_hash((1, 2, 3)) != compute_block_hash((3, 2, 1))


def test_allocate_covers_every_token_and_adopts_the_block_size():
    manager = BlockManager(num_blocks=8, block_size=BS)
    seq = make_seq(range(10))
    manager.allocate(seq)
    assert seq.block_size == BS
    assert len(seq.block_table) == 3 == manager.num_blocks_for(10)
    assert len(set(seq.block_table)) == 3
    assert ref_counts(manager, seq) == [1, 1, 1]
    assert manager.num_free_blocks == 5
    assert (seq.num_cached_tokens, seq.num_computed_tokens) == (0, 0)
    with pytest.raises(ValueError, match="already has blocks"):
        manager.allocate(seq)


def test_hash_is_registered_only_after_its_kv_is_computed():
    manager = BlockManager(num_blocks=16, block_size=BS)
    tokens = list(range(10))
    first = make_seq(tokens, 1)
    manager.allocate(first)
    # Same prompt while the first one's KV is not written yet: nothing may be reused.
    second = make_seq(tokens, 2)
    manager.allocate(second)
    assert second.num_cached_tokens == 0
    assert manager.stats.num_hits == 0

    manager.commit_computed(first, 4)  # one chunk of 4 tokens done
    third = make_seq(tokens, 3)
    manager.allocate(third)
    assert third.num_cached_tokens == 4
    assert third.block_table[0] == first.block_table[0]

    manager.commit_computed(first, 10)
    fourth = make_seq(tokens, 4)
    manager.allocate(fourth)
    assert fourth.num_cached_tokens == 8


def test_partial_last_block_is_never_hashed():
    manager = BlockManager(num_blocks=16, block_size=BS)
    first = make_seq(range(10))  # blocks [0..3] [4..7] [8, 9]
    prefill(manager, first)
    assert len(first.block_hashes) == 2
    assert manager.blocks[first.block_table[2]].hash is None
    # A longer prompt that continues the partial block reuses only the two full blocks.
    second = make_seq([*range(10), 10, 11, 12, 13], 2)
    manager.allocate(second)
    assert second.num_cached_tokens == 8
    assert second.block_table[2] != first.block_table[2]


@pytest.mark.parametrize(("num_tokens", "num_cached"), [(12, 8), (13, 12), (4, 0), (5, 4)])
def test_a_hit_on_the_whole_prompt_still_computes_a_token(num_tokens, num_cached):
    manager = BlockManager(num_blocks=16, block_size=BS)
    prefill(manager, make_seq(range(16), 1))
    seq = make_seq(range(num_tokens), 2)
    manager.allocate(seq)
    assert seq.num_cached_tokens == num_cached
    assert seq.num_computed_tokens == num_cached
    assert seq.num_computed_tokens < seq.num_tokens


def test_hits_keep_the_accounting_right():
    manager = BlockManager(num_blocks=8, block_size=BS)
    first = make_seq(range(12), 1)
    prefill(manager, first)
    manager.free(first)
    assert manager.num_free_blocks == 8  # cached free blocks still count as free
    assert manager.num_cached_free_blocks == 3

    second = make_seq([*range(8), 90, 91, 92], 2)
    manager.allocate(second)
    assert second.num_cached_tokens == 8
    assert (manager.stats.num_hits, manager.stats.num_misses) == (2, 4)
    assert manager.num_free_blocks == 8 - 3
    assert ref_counts(manager, second) == [1, 1, 1]
    manager.commit_computed(second, 11)
    assert second.num_cached_tokens == 8  # committing never touches the reused count

    third = make_seq([*range(8), 70], 3)
    manager.allocate(third)
    assert third.block_table[:2] == second.block_table[:2]
    assert ref_counts(manager, third) == [2, 2, 1]
    assert manager.num_free_blocks == 8 - 4

    manager.free(second)
    assert ref_counts(manager, third) == [1, 1, 1]
    assert manager.num_free_blocks == 8 - 3  # only second's private block came back
    manager.free(third)
    assert manager.num_free_blocks == 8
    assert manager.num_used_blocks == 0


def test_can_allocate_counts_hits_that_leave_the_free_pool():
    manager = BlockManager(num_blocks=4, block_size=BS)
    first = make_seq(range(9), 1)  # 2 full hashed blocks + 1 partial
    prefill(manager, first)
    manager.free(first)
    other = make_seq([500], 2)
    manager.allocate(other)
    assert manager.num_free_blocks == 3  # 1 truly free + 2 cached free
    # 4 blocks: 2 hits (both cached free) + 2 new = 4 taken from a pool of 3.
    seq = make_seq([*range(8), *range(100, 108)], 3)
    assert not manager.can_allocate(seq)
    with pytest.raises(NoFreeBlocksError, match="needs 4 blocks and 3 of 4"):
        manager.allocate(seq)
    assert manager.num_free_blocks == 3
    assert seq.block_table == []


def test_fresh_allocations_never_evict_the_hits_being_taken():
    manager = BlockManager(num_blocks=3, block_size=BS)
    first = make_seq(range(12), 1)
    prefill(manager, first)
    old_table = list(first.block_table)
    manager.free(first)
    seq = make_seq([*range(8), 50, 51, 52, 53], 2)
    assert manager.can_allocate(seq)
    manager.allocate(seq)
    assert seq.block_table[:2] == old_table[:2]
    assert seq.num_cached_tokens == 8
    assert manager.stats.num_evictions == 1  # the third cached block, not a hit


def test_eviction_takes_free_blocks_first_then_the_least_recently_used():
    manager = BlockManager(num_blocks=4, block_size=BS)
    a_tokens, b_tokens = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]
    for request_id, tokens in enumerate((a_tokens, b_tokens)):
        seq = make_seq(tokens, request_id)
        prefill(manager, seq)
        manager.free(seq)
    # Touch A again: its block becomes the most recently used one.
    again = make_seq(a_tokens, 5)
    manager.allocate(again)
    assert again.num_cached_tokens == 4
    manager.free(again)
    assert manager.num_cached_free_blocks == 2

    filler = make_seq(range(100, 112), 6)  # 3 blocks: 2 truly free, then one eviction
    manager.allocate(filler)
    assert manager.stats.num_evictions == 1
    manager.free(filler)

    a_again, b_again = make_seq(a_tokens, 7), make_seq(b_tokens, 8)
    manager.allocate(a_again)
    manager.allocate(b_again)
    assert a_again.num_cached_tokens == 4
    assert b_again.num_cached_tokens == 0  # B was least recently used: evicted


def test_eviction_drops_the_end_of_a_prefix_before_its_beginning():
    manager = BlockManager(num_blocks=4, block_size=BS)
    first = make_seq(range(13), 1)  # 3 full hashed blocks + 1 partial
    prefill(manager, first)
    manager.free(first)
    filler = make_seq(range(100, 105), 2)  # 2 blocks: the free one, then one eviction
    manager.allocate(filler)
    manager.free(filler)
    again = make_seq(range(13), 3)
    manager.allocate(again)
    assert again.num_cached_tokens == 8  # blocks 0 and 1 survived; block 2 was evicted


def test_a_hash_collision_is_caught_by_comparing_tokens(monkeypatch):
    monkeypatch.setattr(block_manager_module, "compute_block_hash", lambda ids, parent=-1: 7)
    manager = BlockManager(num_blocks=8, block_size=BS)
    prefill(manager, make_seq([1, 2, 3, 4, 5], 1))
    seq = make_seq([9, 9, 9, 9, 5], 2)
    manager.allocate(seq)
    assert seq.num_cached_tokens == 0
    manager.commit_computed(seq, 5)  # same hash already taken: stays a private block
    assert manager.blocks[seq.block_table[0]].hash is None


def test_disabled_prefix_cache_reuses_nothing():
    manager = BlockManager(num_blocks=8, block_size=BS, enable_prefix_cache=False)
    first = make_seq(range(12), 1)
    prefill(manager, first)
    manager.free(first)
    assert manager.num_cached_free_blocks == 0
    second = make_seq(range(12), 2)
    manager.allocate(second)
    assert second.num_cached_tokens == 0


def test_decode_appends_a_block_when_the_last_one_is_full_and_hashes_it():
    manager = BlockManager(num_blocks=8, block_size=BS)
    seq = make_seq(range(7), 1)
    manager.allocate(seq)
    manager.commit_computed(seq, 7)  # prefill wrote positions 0..6
    for new_token in (107, 108, 109):
        seq.append_token(new_token)  # sampled; its KV is written by the next step
        assert manager.can_append(seq)
        manager.append_slot(seq)
        assert len(seq.block_table) == seq.num_blocks
        manager.commit_computed(seq, seq.num_tokens - 1)
    assert seq.num_tokens == 10
    assert len(seq.block_table) == 3  # block 2 was added when position 8 needed a slot
    assert len(seq.block_hashes) == 2  # block 1 filled during decode and was hashed

    reader = make_seq(seq.token_ids[:9], 2)
    manager.allocate(reader)
    assert reader.num_cached_tokens == 8
    assert reader.block_table[1] == seq.block_table[1]


def test_append_slot_without_free_blocks_fails_clearly():
    manager = BlockManager(num_blocks=1, block_size=BS)
    seq = make_seq(range(4))
    prefill(manager, seq)
    seq.append_token(4)
    assert not manager.can_append(seq)
    with pytest.raises(NoFreeBlocksError):
        manager.append_slot(seq)


def test_commit_must_grow_within_the_sequence():
    manager = BlockManager(num_blocks=8, block_size=BS)
    seq = make_seq(range(10))
    manager.allocate(seq)
    manager.commit_computed(seq, 6)
    with pytest.raises(ValueError):
        manager.commit_computed(seq, 5)
    with pytest.raises(ValueError):
        manager.commit_computed(seq, 11)


def test_truncate_releases_tail_blocks_and_unhashes_a_private_partial_block():
    manager = BlockManager(num_blocks=8, block_size=BS)
    seq = make_seq(range(10))
    prefill(manager, seq)
    manager.truncate(seq, 5)
    assert seq.token_ids == [0, 1, 2, 3, 4]
    assert seq.num_prompt_tokens == 5
    assert len(seq.block_table) == 2
    assert seq.num_computed_tokens == 5
    assert len(seq.block_hashes) == 1
    assert manager.num_free_blocks == 6
    # Block 1 will be written again, so it must not be offered as a cached prefix.
    reader = make_seq(range(9), 2)
    manager.allocate(reader)
    assert reader.num_cached_tokens == 4


def test_truncate_into_a_shared_block_gives_a_private_copy_to_recompute():
    manager = BlockManager(num_blocks=8, block_size=BS)
    owner = make_seq(range(12), 1)
    prefill(manager, owner)
    seq = make_seq([*range(8), 50, 51, 52], 2)
    manager.allocate(seq)
    assert seq.num_cached_tokens == 8
    manager.commit_computed(seq, 11)
    manager.truncate(seq, 6)
    assert seq.block_table[0] == owner.block_table[0]
    assert seq.block_table[1] != owner.block_table[1]
    assert seq.num_computed_tokens == 4  # positions 4, 5 are recomputed into the new block
    assert seq.num_cached_tokens == 4
    assert ref_counts(manager, owner) == [2, 1, 1]
    reader = make_seq(range(9), 3)
    manager.allocate(reader)
    assert reader.num_cached_tokens == 8  # the owner's block 1 is still intact and cached


def test_truncate_to_zero_frees_everything():
    manager = BlockManager(num_blocks=4, block_size=BS)
    seq = make_seq(range(10))
    manager.allocate(seq)
    manager.truncate(seq, 0)
    assert seq.block_table == []
    assert manager.num_free_blocks == 4


def test_prompts_after_freed_ones_get_consecutive_blocks():
    # The attention reads a sequence on consecutive blocks as one tensor view (no gather).
    manager = BlockManager(num_blocks=6, block_size=BS, enable_prefix_cache=False)
    for request_id, first_token in enumerate((0, 100, 200)):
        seq = make_seq(range(first_token, first_token + 5 * BS), request_id)
        prefill(manager, seq)
        first = seq.block_table[0]
        assert seq.block_table == list(range(first, first + 5))
        manager.free(seq)


def test_blocks_freed_out_of_order_are_handed_out_lowest_first():
    manager = BlockManager(num_blocks=8, block_size=BS, enable_prefix_cache=False)
    first, second = make_seq(range(3 * BS), 0), make_seq(range(3 * BS), 1)
    prefill(manager, first)
    prefill(manager, second)
    manager.free(second)
    manager.free(first)
    third = make_seq(range(7 * BS), 2)
    prefill(manager, third)
    assert third.block_table == list(range(7))


def test_a_prompt_is_hashed_once_however_often_it_is_looked_up(monkeypatch):
    calls = []
    real = block_manager_module.compute_block_hash
    monkeypatch.setattr(
        block_manager_module, "compute_block_hash", lambda *a: calls.append(a) or real(*a)
    )
    manager = BlockManager(num_blocks=16, block_size=BS)
    tokens = list(range(21))  # 5 full blocks, the last token alone in a sixth
    first = make_seq(tokens, 1)
    assert manager.can_allocate(first) and manager.can_allocate(first)
    prefill(manager, first)
    assert len(calls) == 5  # looked up three times, committed once: each block hashed once
    second = make_seq(tokens, 2)
    prefill(manager, second)
    assert second.num_cached_tokens == 20 and len(calls) == 10
    assert second.block_hashes == first.block_hashes
    parent, chain = block_manager_module.NO_PARENT_HASH, []
    for start in range(0, 20, BS):
        parent = real(tuple(tokens[start : start + BS]), parent)
        chain.append(parent)
    assert first.block_hashes == chain


def test_generated_blocks_are_hashed_but_not_kept_with_the_prompts():
    manager = BlockManager(num_blocks=16, block_size=BS)
    seq = make_seq(range(6))
    prefill(manager, seq)
    for token in (6, 7, 8, 9):
        seq.append_token(token)
    keys = list(block_manager_module.prefix_block_keys(seq, BS))
    assert [ids for _, ids in keys] == [(0, 1, 2, 3), (4, 5, 6, 7)]  # not the last token's block
    assert keys[1][0] == compute_block_hash((4, 5, 6, 7), keys[0][0])
    assert len(seq.prompt_keys) == 1  # (4, 5) were the prompt's, 6 and 7 generated


def test_a_truncated_prompt_forgets_the_hashes_of_the_tokens_cut():
    manager = BlockManager(num_blocks=32, block_size=BS)
    tokens = list(range(100, 140))
    seq = make_seq(tokens, 1)
    list(block_manager_module.prefix_block_keys(seq, BS))  # the whole prompt hashed, as a lookup
    manager.allocate(seq)
    manager.commit_computed(seq, 14)
    manager.truncate(seq, 11)  # the OOM policy "truncate": keep a head, then a tail
    for token in (137, 138, 139):
        seq.append_token(token)
        manager.append_slot(seq)
    seq.num_prompt_tokens = seq.num_tokens
    manager.commit_computed(seq, seq.num_tokens)
    third = manager.blocks[seq.block_table[2]]  # registered under what it now holds
    assert third.token_ids == (108, 109, 110, 137)
    assert third.hash == compute_block_hash((108, 109, 110, 137), seq.block_hashes[1])
    again = make_seq(tokens, 2)
    manager.allocate(again)
    assert again.num_cached_tokens == 8  # the first two blocks; the third now holds the tail
