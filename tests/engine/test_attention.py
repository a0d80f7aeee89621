"""Attention backends against a plain reference, with scattered (non-consecutive) KV blocks."""

from __future__ import annotations

import pytest
import torch

from engine.attention import AttentionMetadata, gather_kv, select_backend
from engine.attention.flex import causal_offset_block_mask

BLOCK_SIZE = 4
H, KV, D = 4, 2, 8


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """q: [T, H, D] at positions start..; k, v: [ctx, KV, D] -> [T, H, D], explicit softmax."""
    k = k.repeat_interleave(H // KV, dim=1)
    v = v.repeat_interleave(H // KV, dim=1)
    scores = torch.einsum("thd,chd->htc", q, k) / D**0.5
    q_pos = torch.arange(q.shape[0])[:, None] + start
    scores = scores.masked_fill(torch.arange(k.shape[0])[None, :] > q_pos, float("-inf"))
    return torch.einsum("htc,chd->thd", scores.softmax(-1), v)


def _run_chunks(
    backend, chunk_bounds, block_table, seq_k, seq_v, seq_q, num_blocks: int = 16
) -> list[torch.Tensor]:
    """Each chunk of the sequence through backend.prepare and forward over a zeroed paged cache
    (blocks of BLOCK_SIZE, KV heads and head dim those of seq_k) -> the chunks' outputs."""
    k_cache = torch.zeros(num_blocks, BLOCK_SIZE, *seq_k.shape[1:])
    v_cache = torch.zeros(num_blocks, BLOCK_SIZE, *seq_v.shape[1:])
    table = torch.as_tensor(block_table, dtype=torch.int32)
    outs = []
    for start, end in chunk_bounds:
        positions = torch.arange(start, end)
        slots = table[positions // BLOCK_SIZE].long() * BLOCK_SIZE + positions % BLOCK_SIZE
        meta = backend.prepare(
            AttentionMetadata(
                start=start,
                num_query_tokens=end - start,
                slot_mapping=slots,
                block_table=table,
                block_size=BLOCK_SIZE,
            )
        )
        outs.append(
            backend.forward(
                seq_q[start:end], seq_k[start:end], seq_v[start:end], k_cache, v_cache, meta
            )
        )
    return outs


@pytest.mark.parametrize("name", ["sdpa", "flex"])
@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_chunks_against_scattered_blocks_match_reference(name: str) -> None:
    torch.manual_seed(0)
    num_tokens = 22
    q, k, v = (
        torch.randn(num_tokens, H, D),
        torch.randn(num_tokens, KV, D),
        torch.randn(num_tokens, KV, D),
    )
    block_table = [9, 2, 14, 0, 5, 11]  # 6 blocks of 4 slots, deliberately out of order
    bounds = [(0, 9), (9, 10), (10, 17), (17, 22)]  # a first chunk, a single token, two more
    backend = select_backend(name, torch.device("cpu"))
    outs = _run_chunks(backend, bounds, block_table, k, v, q)
    for (start, end), out in zip(bounds, outs, strict=True):
        expected = _reference(q[start:end], k[:end], v[:end], start)
        assert (out - expected).abs().max().item() < 1e-5, (name, start, end)


def test_gather_is_a_view_for_consecutive_blocks() -> None:
    cache = torch.arange(8 * BLOCK_SIZE * KV * D, dtype=torch.float32).view(8, BLOCK_SIZE, KV, D)
    meta = AttentionMetadata(
        start=0,
        num_query_tokens=10,
        slot_mapping=torch.zeros(10, dtype=torch.long),
        block_table=torch.tensor([3, 4, 5], dtype=torch.int32),
        block_size=BLOCK_SIZE,
        first_block_if_contiguous=3,
    )
    view = gather_kv(cache, meta)
    assert view.shape == (10, KV, D) and view.data_ptr() == cache[3].data_ptr()
    meta.first_block_if_contiguous = None
    assert torch.equal(gather_kv(cache, meta), view)


@pytest.mark.parametrize(
    ("num_queries", "num_keys", "start"), [(300, 384, 50), (128, 640, 512), (5, 128, 3)]
)
def test_flex_block_mask_equals_create_block_mask(
    num_queries: int, num_keys: int, start: int
) -> None:
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, q_idx, kv_idx):
        return q_idx + start >= kv_idx

    ours = causal_offset_block_mask(num_queries, num_keys, start, torch.device("cpu"))
    reference = create_block_mask(mask_mod, None, None, num_queries, num_keys, device="cpu")
    assert torch.equal(ours.to_dense(), reference.to_dense())
    # Blocks declared full skip mask_mod on the GPU: every real query must see all their keys.
    visible = torch.arange(num_keys)[None, :] <= torch.arange(num_queries)[:, None] + start
    counts, indices = ours.full_kv_num_blocks[0, 0], ours.full_kv_indices[0, 0]
    for q_block in range(counts.shape[0]):
        rows = visible[q_block * 128 : (q_block + 1) * 128]
        for kv_block in indices[q_block, : counts[q_block]].tolist():
            assert rows[:, kv_block * 128 : (kv_block + 1) * 128].all()


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_passes_its_kernel_options_for_a_chunk_shorter_than_a_mask_block() -> None:
    # Without options, a compiled engine's tail chunk (96 queries) found no kernel on an H200.
    from engine.attention.flex import MASK_BLOCK, FlexBackend

    backend = FlexBackend(torch.device("cpu"), compile=False)
    seen: list[dict | None] = []
    flex = backend._flex

    def recording_flex(*args, **kwargs):
        seen.append(kwargs.get("kernel_options"))
        return flex(*args, **kwargs)

    backend._flex = recording_flex
    torch.manual_seed(3)
    q, k, v = torch.randn(12, H, D), torch.randn(12, KV, D), torch.randn(12, KV, D)
    outs = _run_chunks(backend, [(0, 7), (7, 12)], [0, 1, 2], k, v, q)
    assert MASK_BLOCK > 12  # both chunks are shorter than one mask block
    assert seen == [backend.kernel_options] * 2
    assert (outs[1] - _reference(q[7:], k, v, 7)).abs().max().item() < 1e-5
