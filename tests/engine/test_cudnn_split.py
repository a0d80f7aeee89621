"""The cuDNN split backend's bookkeeping (head folding, prefix/causal split, log-sum-exp merge)
on the CPU, with an explicit-softmax kernel standing in for cuDNN's."""

from __future__ import annotations

import pytest
import torch

from engine.attention import AttentionMetadata
from engine.attention.cudnn_split import CudnnSplitBackend, math_attend
from engine.errors import EngineError

BLOCK_SIZE = 4
H, KV, D = 8, 2, 16


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """q: [T, H, D] at positions start..; k, v: [ctx, KV, D] -> [T, H, D]."""
    k = k.repeat_interleave(H // KV, dim=1)
    v = v.repeat_interleave(H // KV, dim=1)
    scores = torch.einsum("thd,chd->htc", q, k) / D**0.5
    q_pos = torch.arange(q.shape[0])[:, None] + start
    scores = scores.masked_fill(torch.arange(k.shape[0])[None, :] > q_pos, float("-inf"))
    return torch.einsum("htc,chd->thd", scores.softmax(-1), v)


@pytest.mark.parametrize("block_table", [[0, 1, 2, 3, 4, 5, 6], [9, 2, 14, 0, 5, 11, 7]])
def test_split_chunks_match_reference(block_table: list[int]) -> None:
    torch.manual_seed(0)
    num_tokens = 26
    q = torch.randn(num_tokens, H, D)
    k, v = torch.randn(num_tokens, KV, D), torch.randn(num_tokens, KV, D)
    k_cache, v_cache = torch.zeros(16, BLOCK_SIZE, KV, D), torch.zeros(16, BLOCK_SIZE, KV, D)
    table = torch.tensor(block_table, dtype=torch.int32)
    is_consecutive = block_table == list(range(len(block_table)))
    backend = CudnnSplitBackend(torch.device("cpu"), attend=math_attend)
    # A first chunk, a single token (decode path), and chunks after a cached prefix.
    for start, end in [(0, 9), (9, 10), (10, 17), (17, 26)]:
        positions = torch.arange(start, end)
        slots = table[positions // BLOCK_SIZE].long() * BLOCK_SIZE + positions % BLOCK_SIZE
        meta = backend.prepare(
            AttentionMetadata(
                start=start,
                num_query_tokens=end - start,
                slot_mapping=slots,
                block_table=table,
                block_size=BLOCK_SIZE,
                first_block_if_contiguous=0 if is_consecutive else None,
            )
        )
        out = backend.forward(q[start:end], k[start:end], v[start:end], k_cache, v_cache, meta)
        expected = _reference(q[start:end], k[:end], v[:end], start)
        assert out.shape == expected.shape
        assert (out - expected).abs().max().item() < 1e-5, (start, end)


def test_needs_cuda_without_a_kernel() -> None:
    with pytest.raises(EngineError, match="CUDA"):
        CudnnSplitBackend(torch.device("cpu"))


def test_auto_never_picks_a_half_precision_kernel_for_fp32_or_the_cpu() -> None:
    from engine.attention import select_backend

    assert select_backend("auto", torch.device("cpu"), dtype=torch.bfloat16).name == "sdpa"
    with pytest.raises(EngineError, match="bfloat16 or float16"):
        select_backend("cudnn", torch.device("cpu"), dtype=torch.float32)


def _prefix_chunk(start: int, num_q: int, block_table: list[int] | None):
    """Queries at positions [start, start + num_q) and their metadata over a cache that holds
    the prefix, blocks consecutive or scattered."""
    torch.manual_seed(1)
    num_tokens = start + num_q
    num_blocks = -(-num_tokens // BLOCK_SIZE)
    table = torch.tensor(block_table or list(range(num_blocks)), dtype=torch.int32)
    q = torch.randn(num_q, H, D)
    k, v = torch.randn(num_tokens, KV, D), torch.randn(num_tokens, KV, D)
    k_cache = torch.zeros(int(table.max()) + 1, BLOCK_SIZE, KV, D)
    v_cache = torch.zeros_like(k_cache)
    positions = torch.arange(num_tokens)
    slots = table[positions // BLOCK_SIZE].long() * BLOCK_SIZE + positions % BLOCK_SIZE
    k_cache.view(-1, KV, D)[slots[:start]] = k[:start]
    v_cache.view(-1, KV, D)[slots[:start]] = v[:start]
    meta = AttentionMetadata(
        start=start,
        num_query_tokens=num_q,
        slot_mapping=slots[start:],
        block_table=table,
        block_size=BLOCK_SIZE,
        first_block_if_contiguous=0 if block_table is None else None,
    )
    return q, k, v, k_cache, v_cache, meta


@pytest.mark.parametrize("scattered", [False, True])
def test_a_short_chunk_after_a_long_prefix_splits_the_keys(scattered: bool) -> None:
    start, num_q = 3 * 1024 + 4, 5  # three splits of 1,025 keys and one key left over
    num_blocks = -(-(start + num_q) // BLOCK_SIZE)
    table = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(2)).tolist()
    q, k, v, k_cache, v_cache, meta = _prefix_chunk(start, num_q, table if scattered else None)
    batches: list[int] = []

    def counting_attend(q_, k_, v_, is_causal):
        if not is_causal:
            batches.append(q_.shape[0])
        return math_attend(q_, k_, v_, is_causal)

    # 64 SMs: 2 KV heads of 20 folded rows are 2 programs, so the keys split as far as their
    # length allows (3 splits of at least 1,024 keys).
    backend = CudnnSplitBackend(torch.device("cpu"), attend=counting_attend, num_sms=64)
    out = backend.forward(q, k[start:], v[start:], k_cache, v_cache, meta)
    expected = _reference(q, k, v, start)
    assert batches == [3, 1]  # three splits in one call, then the key left over
    assert (out - expected).abs().max().item() < 1e-5
    # One SM: no split, the same result.
    batches.clear()
    whole = CudnnSplitBackend(torch.device("cpu"), attend=counting_attend, num_sms=1)
    out_whole = whole.forward(q, k[start:], v[start:], k_cache, v_cache, meta)
    assert batches == [1]
    assert (out - out_whole).abs().max().item() < 1e-5


def test_prefix_split_plan() -> None:
    from engine.attention.cudnn_split import plan_prefix_splits

    # A question after a 128K document on an H100: 8 KV heads of 4 x 20 rows, 8 programs.
    assert plan_prefix_splits(num_rows=80, num_kv_heads=8, num_keys=131072, num_sms=132) == 33
    # A long chunk already fills the card: 8 x 256 programs.
    assert plan_prefix_splits(num_rows=32768, num_kv_heads=8, num_keys=131072, num_sms=132) == 1
    # A short prefix splits only into pieces of at least 1,024 keys.
    assert plan_prefix_splits(num_rows=80, num_kv_heads=8, num_keys=3000, num_sms=132) == 2
    assert plan_prefix_splits(num_rows=80, num_kv_heads=8, num_keys=1000, num_sms=132) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU with cuDNN attention")
def test_cudnn_splits_match_one_call_on_the_gpu() -> None:
    """The kernels themselves on the split keys (a batch of strided views), against the unsplit
    call and the fp32 reference."""
    from engine.attention.cudnn_split import is_cudnn_attention_available

    device = torch.device("cuda")
    if not is_cudnn_attention_available(device):
        pytest.skip("cuDNN attention does not run on this GPU")
    torch.manual_seed(3)
    heads, kv_heads, dim, block = 32, 8, 128, 16
    start = 65536 + 40
    num_blocks = -(-(start + 300) // block)
    # A question (the memory-efficient kernel) and a longer chunk (cuDNN's), after 64K keys on
    # consecutive blocks and on scattered ones.
    cases = [
        (num_q, ids)
        for num_q in (20, 300)
        for ids in (list(range(num_blocks)), torch.randperm(num_blocks).tolist())
    ]
    for num_q, table_ids in cases:
        table = torch.tensor(table_ids, dtype=torch.int32, device=device)
        k_cache = torch.randn(num_blocks, block, kv_heads, dim, device=device, dtype=torch.bfloat16)
        v_cache = torch.randn_like(k_cache)
        q = torch.randn(num_q, heads, dim, device=device, dtype=torch.bfloat16)
        k = torch.randn(num_q, kv_heads, dim, device=device, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        positions = torch.arange(start, start + num_q, device=device)
        slots = table[positions // block].long() * block + positions % block
        contiguous = table_ids == list(range(num_blocks))
        meta = AttentionMetadata(
            start=start,
            num_query_tokens=num_q,
            slot_mapping=slots,
            block_table=table,
            block_size=block,
            first_block_if_contiguous=0 if contiguous else None,
        )
        split = CudnnSplitBackend(device)
        whole = CudnnSplitBackend(device, num_sms=1)
        out_split = split.forward(q, k, v, k_cache.clone(), v_cache.clone(), meta)
        out_whole = whole.forward(q, k, v, k_cache.clone(), v_cache.clone(), meta)
        # fp32 reference over the whole context
        k_all = k_cache.index_select(0, table).view(-1, kv_heads, dim)[: start + num_q].clone()
        v_all = v_cache.index_select(0, table).view(-1, kv_heads, dim)[: start + num_q].clone()
        k_all[start:], v_all[start:] = k, v
        group = heads // kv_heads
        scores = (
            torch.einsum("thd,chd->htc", q.float(), k_all.float().repeat_interleave(group, 1))
            / dim**0.5
        )
        keep = torch.arange(start + num_q, device=device)[None] <= positions[:, None]
        scores = scores.masked_fill(~keep[None], float("-inf"))
        expected = torch.einsum(
            "htc,chd->thd", scores.softmax(-1), v_all.float().repeat_interleave(group, 1)
        )

        rel_split, rel_whole = (
            ((out.float() - expected).norm() / expected.norm()).item()
            for out in (out_split, out_whole)
        )
        between = ((out_split.float() - out_whole.float()).norm() / out_whole.float().norm()).item()
        # The split rounds each split's output to bf16 before the merge (fp32) and the merged
        # output again: two bf16 roundings (unit 2**-8 each) more than the one call. A wrong
        # merge (a log base, a weight) is off by the output's own size.
        assert between < 2 * 2**-8
        assert rel_split < rel_whole + 2 * 2**-8


def test_short_chunks_take_the_short_kernel_and_long_ones_a_padded_length() -> None:
    from engine.attention.cudnn_split import QUERY_BUCKET, SHORT_CHUNK_QUERIES

    calls: list[tuple[str, int]] = []  # kernel, query rows of the causal part's call

    def kernel(name):
        def attend(q_, k_, v_, is_causal):
            calls.append((name, q_.shape[2]))
            return math_attend(q_, k_, v_, is_causal)

        return attend

    backend = CudnnSplitBackend(
        torch.device("cpu"), attend=kernel("long"), short_attend=kernel("short")
    )
    cases = [
        (SHORT_CHUNK_QUERIES, ("short", SHORT_CHUNK_QUERIES)),
        (SHORT_CHUNK_QUERIES + 1, ("long", QUERY_BUCKET)),  # zeros after the real queries
        (QUERY_BUCKET, ("long", QUERY_BUCKET)),
    ]
    for start in (0, 40):
        for num_q, first_call in cases:
            calls.clear()
            q, k, v, k_cache, v_cache, meta = _prefix_chunk(start, num_q, None)
            out = backend.forward(q, k[start:], v[start:], k_cache, v_cache, meta)
            assert calls[0] == first_call  # the causal part (then the prefix part, if any)
            assert len(calls) == (2 if start else 1)
            assert out.shape == q.shape
            assert (out - _reference(q, k, v, start)).abs().max().item() < 1e-4
