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
