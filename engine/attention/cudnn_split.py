"""cuDNN attention (CUDA, Hopper): a chunk's attention split into its cached prefix and itself.

A chunk of T queries at positions [start, start + T) attends to the `start` cached keys with no
mask at all, and to its own T keys with a plain causal mask. Both parts are dense kernels
without an offset mask, so cuDNN's fast SDPA kernels apply; they are merged with their
log-sum-exps: out = (e^l1 * o1 + e^l2 * o2) / (e^l1 + e^l2) = lerp(o2, o1, sigmoid(l1 - l2)).

Grouped-query attention without copying the prefix K/V: the G query heads that share a KV head
are folded into the query axis, so the prefix part runs as KV heads of G*T queries each against
the cache's own K/V (a strided view when the sequence's blocks are consecutive). Only the
chunk's own K/V (T tokens) are repeated per query head for the causal part.

Measured on an H200 (bench/attention_micro.py, 8,192 queries after 24K/120K cached keys, 32/8
heads, head dim 128): this split at 550-570 TFLOP/s, FlexAttention's offset-mask kernel at 380-390,
SDPA with a lower-right causal mask at 340 (bench/results/prefill_h200.md).

Chunks of at most SHORT_CHUNK_QUERIES queries run PyTorch's memory-efficient kernel in cuDNN's
place, the same split and merges around it: cuDNN builds a plan for every new shape (below).

A short chunk after a long prefix (a question after its document: 20 queries after 128K keys)
splits the prefix part along the keys. cuDNN runs one program per 128 query rows and KV head,
so 8 KV heads of 80 folded rows are 8 programs, 8 of an H100's 132 SMs each reading 1/8 of the
17 GB of KV. The splits run as the batch of one call (each a strided view of the same keys) and
are merged by log-sum-exp like the two parts above.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv
from engine.errors import EngineError

# (q [B, N, L, D], k [B, N, S, D], v, is_causal) -> (out [B, N, L, D], lse [B, N, L] fp32)
AttendFn = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, bool], tuple[torch.Tensor, torch.Tensor]
]

# A chunk of at most SHORT_CHUNK_QUERIES queries (a question, a short prompt) runs PyTorch's
# memory-efficient kernel instead of cuDNN's. cuDNN builds a plan for every new shape, and every
# question has a length of its own: on an H100 a new shape's first call took 42-860 ms, the
# same call again 1 ms (bench/results/cudnn_plan_cost_h100.md; PyTorch's opt-in to avoid it,
# TORCH_CUDNN_SDPA_AVOID_RECOMPILE, did not). The memory-efficient kernel builds none and is as
# fast on short chunks (0.5-1.1 ms a layer after 32K-128K keys, against cuDNN's 0.8-1.2) but
# 2.2-3.5x slower on 5-8K-query chunks, where one plan (about 45-150 ms) is less than what 32
# layers lose. The crossover, 32 layers x (efficient - cuDNN) = one plan, lies near 1 ms a layer
# for cuDNN: about 256 queries after a 128K prefix (0.74 ms at 128 queries, 2.1 at 512).
SHORT_CHUNK_QUERIES = 256
# A longer chunk is padded to a multiple of this many queries for cuDNN: at most 16 plans for
# chunks up to 8,192 queries, whatever the prompts' lengths (their prefix lengths are multiples
# of the chunk size but for a chunk after a cached prefix), for at most 511 rows of padding.
QUERY_BUCKET = 512
# cuDNN's fused kernel: one program per QUERY_TILE_ROWS query rows and head. The prefix part is
# split along its keys until there are PROGRAMS_PER_SM programs for every SM, each split at
# least MIN_KEYS_PER_SPLIT keys (a shorter one is mostly its prologue and its share of the merge).
QUERY_TILE_ROWS = 128
PROGRAMS_PER_SM = 2
MIN_KEYS_PER_SPLIT = 1024


def plan_prefix_splits(*, num_rows: int, num_kv_heads: int, num_keys: int, num_sms: int) -> int:
    """Splits of the prefix's keys for num_rows folded query rows per KV head."""
    programs = num_kv_heads * -(-num_rows // QUERY_TILE_ROWS)
    wanted = -(-PROGRAMS_PER_SM * num_sms // programs)
    return max(1, min(wanted, num_keys // MIN_KEYS_PER_SPLIT))


def merge_partials(outs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over disjoint key sets merged: outs [P, ..., D], lses [P, ...] fp32 ->
    (out [..., D] in outs' dtype, lse [...] fp32)."""
    top = lses.amax(0)
    weights = (lses - top).exp()  # [P, ...]
    total = weights.sum(0)
    out = (outs.float() * weights[..., None]).sum(0) / total[..., None]
    return out.to(outs.dtype), top + total.log()


def cudnn_attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    out, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(
        q, k, v, None, True, 0.0, is_causal, False
    )[:2]
    return out, lse.reshape(q.shape[:3]).float()


def efficient_attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's memory-efficient kernel (CUTLASS): no plan to build for a new shape."""
    out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, None, True, 0.0, is_causal
    )[:2]
    return out, lse[..., : q.shape[2]].float()  # its log-sum-exps are padded per 32 rows


def math_attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference with explicit scores (tests on the CPU; small shapes only)."""
    scores = torch.einsum("bnld,bnsd->bnls", q.float(), k.float()) / q.shape[-1] ** 0.5
    if is_causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    lse = scores.logsumexp(-1)  # [B, N, L]
    out = torch.einsum("bnls,bnsd->bnld", (scores - lse[..., None]).exp(), v.float())
    return out.to(q.dtype), lse


@functools.cache
def is_cudnn_attention_available(device: torch.device) -> bool:
    """Whether cuDNN's fused attention runs on this GPU (cuDNN 9 on Ampere or newer); probed
    once with a tiny call, since the build, the driver and the GPU all have a say."""
    if device.type != "cuda":
        return False
    try:
        q = torch.zeros(1, 1, 16, 64, device=device, dtype=torch.bfloat16)
        cudnn_attend(q, q, q, True)
        return True
    except Exception:  # an unsupported GPU or build raises RuntimeError or worse
        return False


class CudnnSplitBackend(AttentionBackend):
    name = "cudnn"
    materializes_scores = False

    def __init__(
        self,
        device: torch.device,
        attend: AttendFn | None = None,
        num_sms: int | None = None,
        short_attend: AttendFn | None = None,
    ) -> None:
        """attend, short_attend (chunks of at most SHORT_CHUNK_QUERIES queries; default: attend
        when attend is given) and num_sms stand in for the kernels and the card's SM count
        (tests on the CPU, benchmarks)."""
        if attend is None:
            if device.type != "cuda":
                raise EngineError("The cudnn attention backend needs a CUDA device.")
            attend = cudnn_attend
            short_attend = short_attend or efficient_attend
        self._short_attend = short_attend or attend
        if num_sms is None:
            num_sms = (
                torch.cuda.get_device_properties(device).multi_processor_count
                if device.type == "cuda"
                else 1
            )
        self._attend = attend
        self._num_sms = num_sms

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        num_q = q.shape[0]
        if num_q <= SHORT_CHUNK_QUERIES:
            # A short chunk (a question; a decode row where no batched kernel runs): a kernel
            # with no plans (SHORT_CHUNK_QUERIES says why).
            return self._attend_chunk(self._short_attend, q, k, v, k_cache, v_cache, meta)
        # A long one: cuDNN, the chunk padded to a multiple of QUERY_BUCKET queries, so that
        # prompts of every length share a few plans. The padding rows are zeros after the real
        # ones: under the causal mask no real query sees their keys, and their own outputs are
        # cut off.
        padded = -(-num_q // QUERY_BUCKET) * QUERY_BUCKET
        if padded != num_q:
            rows = (0, 0, 0, 0, 0, padded - num_q)
            q, k, v = F.pad(q, rows), F.pad(k, rows), F.pad(v, rows)
        out = self._attend_chunk(self._attend, q, k, v, k_cache, v_cache, meta)
        return out[:num_q]

    def _attend_chunk(
        self,
        attend: AttendFn,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        num_q, num_heads, head_dim = q.shape
        num_kv_heads = k.shape[1]
        group = num_heads // num_kv_heads
        # The chunk against itself, causal: K/V repeated per query head (T tokens only).
        k_rep = k.repeat_interleave(group, dim=1) if group > 1 else k  # [T, H, D]
        v_rep = v.repeat_interleave(group, dim=1) if group > 1 else v
        o_self, lse_self = attend(
            q.transpose(0, 1).unsqueeze(0),  # [1, H, T, D]
            k_rep.transpose(0, 1).unsqueeze(0),
            v_rep.transpose(0, 1).unsqueeze(0),
            True,
        )
        o_self, lse_self = o_self[0], lse_self[0]  # [H, T, D], [H, T]
        if meta.start == 0:
            return o_self.transpose(0, 1)  # [T, H, D]
        # The cached prefix, no mask: fold the G query heads of a KV head into the query axis.
        # rows: [G*T, KV, D], row g*T + t of KV head j is query head j*G + g at token t; seen
        # as [1, KV, G*T, D] its memory is in (batch, sequence, head, dim) order, like the
        # cache's K/V (cuDNN's path for new lengths without a new plan wants that layout).
        rows = (
            q.view(num_q, num_kv_heads, group, head_dim)
            .permute(2, 0, 1, 3)
            .reshape(group * num_q, num_kv_heads, head_dim)
        )
        prefix = AttentionMetadata(
            start=0,
            num_query_tokens=meta.start,
            slot_mapping=meta.slot_mapping,
            block_table=meta.block_table,
            block_size=meta.block_size,
            first_block_if_contiguous=meta.first_block_if_contiguous,
        )
        keys = gather_kv(k_cache, prefix)  # [start, KV, D], a view when blocks are consecutive
        values = gather_kv(v_cache, prefix)
        o_prefix, lse_prefix = self._attend_prefix(attend, rows, keys, values)
        o_prefix = o_prefix.reshape(num_heads, num_q, head_dim)  # [H, T, D]
        lse_prefix = lse_prefix.reshape(num_heads, num_q)
        # Weight of the prefix part: e^l1 / (e^l1 + e^l2) = sigmoid(l1 - l2), [H, T, 1].
        weight = torch.sigmoid(lse_prefix - lse_self)[..., None].to(q.dtype)
        out = torch.empty_like(q)  # [T, H, D], written through a [H, T, D] view
        torch.lerp(o_self, o_prefix, weight, out=out.transpose(0, 1))
        return out

    def _attend_prefix(
        self, attend: AttendFn, rows: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """rows [R, KV, D] (queries folded per KV head) against keys, values [S, KV, D] with no
        mask: out [KV, R, D], lse [KV, R]. Split along the keys when R rows leave SMs idle: the
        first n * (S // n) keys as n batch entries of one call, the few left over in a second.
        Every operand is passed in (batch, sequence, head, dim) memory order."""
        num_keys, num_kv_heads, head_dim = keys.shape
        splits = plan_prefix_splits(
            num_rows=rows.shape[0],
            num_kv_heads=num_kv_heads,
            num_keys=num_keys,
            num_sms=self._num_sms,
        )

        def bhsd(x: torch.Tensor) -> torch.Tensor:  # [S, KV, D] -> [1, KV, S, D], a view
            return x.transpose(0, 1).unsqueeze(0)

        if splits == 1:
            out, lse = attend(bhsd(rows), bhsd(keys), bhsd(values), False)
            return out[0], lse[0]
        per_split = num_keys // splits
        body = splits * per_split

        def split(kv: torch.Tensor) -> torch.Tensor:  # [splits, KV, per_split, D], a view
            return kv[:body].view(splits, per_split, num_kv_heads, head_dim).transpose(1, 2)

        queries = rows.expand(splits, *rows.shape).contiguous().transpose(1, 2)
        outs, lses = attend(queries, split(keys), split(values), False)
        if body < num_keys:  # the remainder: fewer keys than splits
            out, lse = attend(bhsd(rows), bhsd(keys[body:]), bhsd(values[body:]), False)
            outs, lses = torch.cat([outs, out]), torch.cat([lses, lse])
        return merge_partials(outs, lses)
