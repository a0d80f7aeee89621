"""The flash-attn 4 backend's own logic on the CPU: which kernel call it makes for each step, the
split of a chunk into its cached prefix and its own keys, the log-sum-exp blend, and the paged
path for scattered blocks.

flash-attn 4 runs on Hopper and Blackwell GPUs only, so its three entry points are stood in for
by explicit-softmax implementations of the same contract (bottom-right causal mask, grouped
heads, natural-log LSE [1, H, T], paged K/V through a page table and seqused_k). The kernels
themselves are checked on the GPU by bench/gpu_check.py and bench/attention_micro.py.
"""

from __future__ import annotations

import pytest
import torch

from engine.attention import AttentionMetadata
from engine.attention.flash import FlashAttn4Backend, merge_by_lse

BLOCK_SIZE = 4
H, KV, D = 4, 2, 16
LIBRARY_TILE = "flash-attn's choice"  # what the fake records when no tile_mn is passed


def _attend(q, k, v, causal: bool):
    """q [1, T, H, D]; k, v [1, S, KV, D] -> out [1, T, H, D], lse [1, H, T] (natural log)."""
    k = k.repeat_interleave(H // KV, dim=2)
    v = v.repeat_interleave(H // KV, dim=2)
    scores = torch.einsum("bthd,bshd->bhts", q, k) / D**0.5
    if causal:  # bottom-right: query i sees keys up to S - T + i
        num_q, num_k = q.shape[1], k.shape[1]
        hidden = torch.arange(num_k)[None, :] > torch.arange(num_q)[:, None] + (num_k - num_q)
        scores = scores.masked_fill(hidden, float("-inf"))
    lse = scores.logsumexp(-1)
    out = torch.einsum("bhts,bshd->bthd", (scores - lse[..., None]).exp(), v)
    return out, lse


class FakeFlashAttn4:
    """flash_attn.cute.interface's entry points, with every call recorded."""

    def __init__(self, *, with_private_fwd: bool = True) -> None:
        self.calls: list[tuple[str, dict]] = []
        if not with_private_fwd:
            self._flash_attn_fwd = None

    def flash_attn_func(self, q, k, v, causal=False):
        self.calls.append(("func", {"causal": causal, "num_keys": k.shape[1]}))
        return _attend(q, k, v, causal)

    def flash_attn_varlen_func(self, q, k, v, page_table=None, seqused_k=None, causal=False):
        self.calls.append(("varlen", {"pages": page_table.tolist(), "used": seqused_k.tolist()}))
        num_keys = int(seqused_k[0])
        keys = k[page_table[0].long()].flatten(0, 1)[:num_keys][None]  # [1, S, KV, D]
        values = v[page_table[0].long()].flatten(0, 1)[:num_keys][None]
        return _attend(q, keys, values, causal)

    def _flash_attn_fwd(self, q, k, v, causal=False, tile_mn=LIBRARY_TILE, return_lse=False):
        self.calls.append(("fwd", {"causal": causal, "tile": tile_mn, "num_keys": k.shape[1]}))
        out, lse = _attend(q, k, v, causal)
        return out, lse, None, None  # flash-attn 4 also returns p and row_max


def _reference(q, k, v, start):
    """q [T, H, D] at positions start..; k, v [start + T, KV, D]."""
    return _attend(q[None], k[None], v[None], causal=True)[0][0]


def _step(backend, q, k, v, caches, table, start, *, consecutive: bool):
    positions = torch.arange(start, start + q.shape[0])
    table_t = torch.tensor(table, dtype=torch.int32)
    slots = table_t[positions // BLOCK_SIZE].long() * BLOCK_SIZE + positions % BLOCK_SIZE
    meta = backend.prepare(
        AttentionMetadata(
            start=start,
            num_query_tokens=q.shape[0],
            slot_mapping=slots,
            block_table=table_t,
            block_size=BLOCK_SIZE,
            first_block_if_contiguous=table[0] if consecutive else None,
        )
    )
    return backend.forward(q, k, v, *caches, meta)


@pytest.mark.parametrize("consecutive", [True, False])
def test_chunks_match_reference_and_take_the_expected_calls(consecutive: bool) -> None:
    torch.manual_seed(0)
    num_tokens = 22
    q = torch.randn(num_tokens, H, D)
    k, v = torch.randn(num_tokens, KV, D), torch.randn(num_tokens, KV, D)
    table = [3, 4, 5, 6, 7, 8] if consecutive else [9, 2, 14, 0, 5, 11]
    fake = FakeFlashAttn4()
    backend = FlashAttn4Backend(fake)
    caches = (torch.zeros(16, BLOCK_SIZE, KV, D), torch.zeros(16, BLOCK_SIZE, KV, D))
    for start, end in [(0, 9), (9, 10), (10, 17), (17, 22)]:
        fake.calls.clear()
        out = _step(
            backend,
            q[start:end],
            k[start:end],
            v[start:end],
            caches,
            table,
            start,
            consecutive=consecutive,
        )
        expected = _reference(q[start:end], k[:end], v[:end], start)
        assert (out - expected).abs().max().item() < 1e-5, (start, end)
        kinds = [name for name, _ in fake.calls]
        if not consecutive:
            assert kinds == ["varlen"]
            assert fake.calls[0][1]["used"] == [end]
        elif start == 0 or end - start == 1:  # nothing cached yet, or a decode step
            assert kinds == ["func"]
        else:  # prefix without a mask, wide key tiles; then the chunk's own keys, causal
            assert fake.calls == [
                ("fwd", {"causal": False, "tile": backend.prefix_tile, "num_keys": start}),
                ("fwd", {"causal": True, "tile": LIBRARY_TILE, "num_keys": end - start}),
            ]
    # Every position's K/V landed in its slot (the slice copy for consecutive blocks).
    slots = torch.tensor(table)[torch.arange(num_tokens) // BLOCK_SIZE] * BLOCK_SIZE
    slots += torch.arange(num_tokens) % BLOCK_SIZE
    assert torch.equal(caches[0].view(-1, KV, D)[slots], k)
    assert torch.equal(caches[1].view(-1, KV, D)[slots], v)


def test_a_prefix_tile_of_none_leaves_the_tile_to_flash_attn() -> None:
    torch.manual_seed(2)
    q, k, v = torch.randn(8, H, D), torch.randn(8, KV, D), torch.randn(8, KV, D)
    fake = FakeFlashAttn4()
    backend = FlashAttn4Backend(fake)
    backend.prefix_tile = None
    caches = (torch.zeros(8, BLOCK_SIZE, KV, D), torch.zeros(8, BLOCK_SIZE, KV, D))
    _step(backend, q[:4], k[:4], v[:4], caches, [0, 1], 0, consecutive=True)
    fake.calls.clear()
    out = _step(backend, q[4:], k[4:], v[4:], caches, [0, 1], 4, consecutive=True)
    assert [call[1]["tile"] for call in fake.calls] == [LIBRARY_TILE, LIBRARY_TILE]
    assert (out - _reference(q[4:], k, v, 4)).abs().max().item() < 1e-5


def test_without_the_private_entry_point_a_chunk_is_one_causal_call() -> None:
    torch.manual_seed(1)
    q, k, v = torch.randn(6, H, D), torch.randn(10, KV, D), torch.randn(10, KV, D)
    fake = FakeFlashAttn4(with_private_fwd=False)
    backend = FlashAttn4Backend(fake)
    assert not backend.split_prefix
    caches = (torch.zeros(8, BLOCK_SIZE, KV, D), torch.zeros(8, BLOCK_SIZE, KV, D))
    _step(backend, q[:4], k[:4], v[:4], caches, [0, 1, 2], 0, consecutive=True)
    fake.calls.clear()
    out = _step(backend, q, k[4:], v[4:], caches, [0, 1, 2], 4, consecutive=True)
    assert [name for name, _ in fake.calls] == ["func"]
    assert (out - _reference(q, k, v, 4)).abs().max().item() < 1e-5


def test_merge_blends_in_fp32_when_the_parts_are_bf16() -> None:
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 8, H, D), torch.randn(1, 200, KV, D), torch.randn(1, 200, KV, D)
    expected = _attend(q, k, v, causal=True)[0]
    o1, l1 = _attend(q, k[:, :192], v[:, :192], causal=False)
    o2, l2 = _attend(q, k[:, 192:], v[:, 192:], causal=True)
    merged = merge_by_lse(o1.bfloat16(), l1, o2.bfloat16(), l2)
    assert merged.dtype == torch.bfloat16
    # Only the parts' own bf16 rounding is left: well under bf16's 2^-8 relative step.
    error = (merged.float() - expected).norm() / expected.norm()
    assert error < 3e-3
