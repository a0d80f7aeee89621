"""The Triton kernels behind paged_decode.py (imported only where Triton is).

Flash-decoding: program (sequence b, KV head, split) walks its share of the sequence's tokens,
TILE_N tokens (several pages) per iteration, gathered through the block table, and keeps an
online softmax in fp32 for all GROUP query heads of its KV head at once (padded to GROUP_PAD
rows for tl.dot), so each K/V byte is read once per sequence. With one split it writes the
normalized output; with several it writes a partial output and its log-sum-exp (base 2) to a
workspace, and _merge_splits_kernel combines them, or (FUSED_MERGE, given a zeroed counter per
sequence and KV head) the last program of each sequence and KV head to finish does.

A split's token range comes from the sequence's own context length, read on the device: the
host never needs it, so a CUDA graph replays with new context_lens and block tables.

Triton compiles a kernel again for each new value of a constexpr and, by default, whenever an
integer argument turns divisible by 16 or stops being: seconds inside whichever step first needs
it. The arguments that change from step to step (the block table's width, the split count) are
left unspecialized (do_not_specialize), and paged_decode.prebuild compiles the rest (one split or
several, each power-of-two pad of the merge) when the engine starts.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["max_blocks", "stride_bt"])
def _paged_decode_split_kernel(
    q_ptr,  # [B, H, D]
    k_ptr,  # [num_blocks, BLOCK_SIZE, KV, D]
    v_ptr,
    k_scale_ptr,  # [num_blocks, BLOCK_SIZE, KV] fp32: read when KV_FP8
    v_scale_ptr,
    block_tables_ptr,  # [B, max_blocks] int32
    context_lens_ptr,  # [B] int32
    out_ptr,  # [B, H, D]: written when SINGLE_SPLIT
    part_out_ptr,  # [B, H, S, D] fp32: written otherwise
    part_lse_ptr,  # [B, H, S] fp32, log2 domain
    counters_ptr,  # [>= B * KV] int32, zero between launches: read when FUSED_MERGE
    scale_log2,  # softmax scale * log2(e): scores go through exp2
    max_blocks,
    stride_qb,
    stride_qh,
    stride_kn,
    stride_ks,
    stride_kh,
    stride_vn,
    stride_vs,
    stride_vh,
    stride_sn,  # the scales' block and slot strides (their KV head stride is 1)
    stride_ss,
    stride_bt,
    stride_ob,
    stride_oh,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILE_N: tl.constexpr,
    SINGLE_SPLIT: tl.constexpr,
    KV_FP8: tl.constexpr,
    FP16_DOTS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    FUSED_MERGE: tl.constexpr,
    GROUP_P2: tl.constexpr,
    MERGE_CHUNK: tl.constexpr,
    V_PAIRS: tl.constexpr,
    PAIRS_ASM: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # programmatic dependent launch: q and this step's K/V slot come from kernels
        tl.extra.cuda.gdc_wait()  # before this one; nothing is read before they finish
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    num_splits = tl.num_programs(2)
    num_heads = tl.num_programs(1) * GROUP

    # A context longer than the block table would read past its row: clamp it.
    ctx = tl.minimum(tl.load(context_lens_ptr + seq), max_blocks * BLOCK_SIZE)
    # Whole tiles per split, so no tile straddles two splits.
    tiles_per_split = tl.cdiv(tl.cdiv(ctx, TILE_N), num_splits)
    begin = split * tiles_per_split * TILE_N
    end = tl.minimum(begin + tiles_per_split * TILE_N, ctx)

    rows = tl.arange(0, GROUP_PAD)  # query heads of this KV head (padded)
    dims = tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, TILE_N)
    heads = kv_head * GROUP + rows  # [GROUP_PAD]
    row_ok = rows < GROUP
    dim_ok = dims < HEAD_DIM

    q = tl.load(
        q_ptr + seq * stride_qb + heads[:, None] * stride_qh + dims[None, :],
        mask=row_ok[:, None] & dim_ok[None, :],
        other=0.0,
    )  # [GROUP_PAD, BLOCK_D]
    # The scores' factor per token: the softmax scale, times a token's K scale on an FP8 cache.
    score_gain = scale_log2
    if FP16_DOTS:
        # An FP8 cache read by a 16-bit model: both dots in fp16, E4M3 widening to fp16 in one
        # instruction for two values (to bf16 it takes a detour through fp32). q goes to fp16
        # exactly where it fits; a q above 16384 is scaled down first by a power of two (q_gain,
        # 2**(13 - q_max's exponent), undone in the scores' factor), so that nothing overflows
        # fp16's 65504 and a bf16 q still goes to fp16 exactly (16384 / q_max rounded it: two
        # keys that tie took 0.63 and 0.37 of the weight).
        q_wide = q.to(tl.float32)
        q_max = tl.max(tl.max(tl.abs(q_wide), 1), 0)
        q_exponent = (q_max.to(tl.int32, bitcast=True) >> 23) - 127
        power_of_two = ((140 - q_exponent) << 23).to(tl.float32, bitcast=True)
        q_gain = tl.where(q_max > 16384.0, power_of_two, 1.0)
        q = (q_wide * q_gain).to(tl.float16)
        score_gain = scale_log2 / q_gain

    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)  # running max (log2 domain)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)  # running sum of exp2(s - m_i)
    acc = tl.zeros([GROUP_PAD, BLOCK_D], dtype=tl.float32)
    if V_PAIRS:
        # An FP8 cache's V read as 16-bit pairs (dimensions 2j, 2j + 1 of a token): the P @ V
        # dot wants V's tokens as its reduction, which Triton gathers for 8-bit values one byte
        # a shared-memory load, but for 16-bit ones with ldmatrix.trans. Each pair is then
        # split in registers into its even and odd dimension, each half with its own dot and
        # its own accumulator, interleaved again after the loop.
        pairs = tl.arange(0, BLOCK_D // 2)
        pair_ok = pairs < HEAD_DIM // 2
        v_pair_ptr = v_ptr.to(tl.pointer_type(tl.int16))
        acc_even = tl.zeros([GROUP_PAD, BLOCK_D // 2], dtype=tl.float32)
        acc_odd = tl.zeros([GROUP_PAD, BLOCK_D // 2], dtype=tl.float32)
    table_row = block_tables_ptr + seq * stride_bt

    # The first tile's block ids; each iteration then fetches the next tile's (loop-carried),
    # so no K/V address waits on a load of its own iteration and Triton's pipeliner keeps
    # num_stages - 1 K/V tiles in flight (with the ids loaded in the same iteration, Triton
    # 3.6 single-buffers them: seen in its sm_90 build).
    first = begin + offs_n
    blocks = tl.load(table_row + first // BLOCK_SIZE, mask=first < end, other=0)
    for tile_begin in range(begin, end, TILE_N):
        tokens = tile_begin + offs_n  # [TILE_N]
        valid = tokens < end
        slots = tokens % BLOCK_SIZE
        # A token-only mask keeps the loads 16-byte vectors along D. (A compile-time `if`
        # block, which Triton resolves statically: no ternary.)
        if BLOCK_D == HEAD_DIM:  # noqa: SIM108
            kv_mask = valid[:, None]
        else:
            kv_mask = valid[:, None] & dim_ok[None, :]
        # int64: block id * block stride passes 2**31 elements in a large cache.
        wide = blocks.to(tl.int64)
        # A token's D values are contiguous (the KV heads of a slot are interleaved).
        k_rows = wide * stride_kn + slots * stride_ks + kv_head * stride_kh  # [TILE_N]
        v_rows = wide * stride_vn + slots * stride_vs + kv_head * stride_vh
        k = tl.load(k_ptr + k_rows[:, None] + dims[None, :], mask=kv_mask, other=0.0)
        if V_PAIRS:  # [TILE_N, BLOCK_D // 2] int16 (v_rows even: the launcher checks)
            pair_mask = valid[:, None] & pair_ok[None, :]
            v = tl.load(
                v_pair_ptr + (v_rows // 2)[:, None] + pairs[None, :], mask=pair_mask, other=0
            )
        else:
            v = tl.load(v_ptr + v_rows[:, None] + dims[None, :], mask=kv_mask, other=0.0)
        if KV_FP8:
            # A token's K scale (per KV head) multiplies its column of the scores, in fp32: K's
            # E4M3 values widen exactly to q's dtype (or fp16) for tl.dot.
            scale_rows = wide * stride_sn + slots * stride_ss + kv_head  # [TILE_N]
            k_scale = tl.load(k_scale_ptr + scale_rows, mask=valid, other=0.0)
            v_scale = tl.load(v_scale_ptr + scale_rows, mask=valid, other=0.0)
            if FP16_DOTS:
                k = k.to(tl.float16)
                if not V_PAIRS:
                    v = v.to(tl.float16)  # exact: V's scales go into p, below
            else:
                # V dequantized (an fp32 model: its dots are fp32 anyway).
                k = k.to(q.dtype)
                v = (v.to(tl.float32) * v_scale[:, None]).to(q.dtype)
            token_gain = k_scale * score_gain  # [TILE_N]
        upcoming = tokens + TILE_N
        blocks = tl.load(table_row + upcoming // BLOCK_SIZE, mask=upcoming < end, other=0)

        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # [GROUP_PAD, TILE_N]
        if KV_FP8:  # noqa: SIM108 (a compile-time branch)
            scores = scores * token_gain[None, :]
        else:
            scores = scores * scale_log2
        scores = tl.where(valid[None, :], scores, float("-inf"))
        # Every tile holds at least one valid token, so m_new is finite from the first tile on.
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])  # [GROUP_PAD, TILE_N]
        l_i = l_i * alpha + tl.sum(p, 1)
        if FP16_DOTS:
            # Each weight times its token's V scale, in fp32, then divided by the row's largest
            # (top): the fp16 operand is at most 1 with its largest term 1 (to a rounding), so what
            # rounds to fp16 subnormals is below 2**-14 of the row's largest term (a V scale
            # folded into p alone went subnormal for a small V: 10% off at |V| ~ 1e-4).
            weighted = p * v_scale[None, :]
            top = tl.max(weighted, 1)  # [GROUP_PAD]
            # A top below fp32's smallest normal (a tile far below the running max) would make
            # 1 / top infinite: its shares are 0 in fp16 anyway.
            top = tl.where(top >= 1.1754944e-38, top, 1.0)
            share = (weighted * (1.0 / top)[:, None]).to(tl.float16)
            if V_PAIRS:
                even, odd = _e4m3_pairs_to_fp16(v, PAIRS_ASM)
                acc_even = acc_even * alpha[:, None] + tl.dot(share, even) * top[:, None]
                acc_odd = acc_odd * alpha[:, None] + tl.dot(share, odd) * top[:, None]
            else:
                acc = acc * alpha[:, None] + tl.dot(share, v) * top[:, None]
        else:
            update = tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
            acc = acc * alpha[:, None] + update
        m_i = m_new
    if V_PAIRS:  # dimension 2j from the even half, 2j + 1 from the odd
        acc = tl.reshape(tl.join(acc_even, acc_odd), (GROUP_PAD, BLOCK_D))

    if USE_PDL:  # the next kernel may launch now: it waits for this one to finish
        tl.extra.cuda.gdc_launch_dependents()
    # An empty split (or a padding row, context 0) has l_i = 0: output 0, lse -inf.
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # [GROUP_PAD, BLOCK_D]
    out_mask = row_ok[:, None] & dim_ok[None, :]
    if SINGLE_SPLIT:
        out_ptrs = out_ptr + seq * stride_ob + heads[:, None] * stride_oh + dims[None, :]
        tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=out_mask)
    else:
        part_rows = (seq * num_heads + heads) * num_splits + split  # [GROUP_PAD]
        tl.store(part_out_ptr + part_rows[:, None] * HEAD_DIM + dims[None, :], out, mask=out_mask)
        tl.store(part_lse_ptr + part_rows, m_i + tl.log2(l_i), mask=row_ok)
        if FUSED_MERGE:
            _merge_if_last(
                counters_ptr, part_out_ptr, part_lse_ptr, out_ptr, seq, kv_head,
                tl.num_programs(1), num_splits, num_heads, stride_ob, stride_oh,
                GROUP, GROUP_P2, HEAD_DIM, BLOCK_D, MERGE_CHUNK,
            )  # fmt: skip


@triton.jit
def _e4m3_pairs_to_fp16(pairs, ASM: tl.constexpr):
    """16-bit words, each two E4M3 values (low byte, high byte) -> the low values and the high
    values in fp16 (exact: every E4M3 value is one). ASM (compiled): per two words, one byte
    permute and one cvt.rn.f16x2.e4m3x2 for each half; otherwise (Triton's interpreter, which
    runs no inline assembly) the same through Triton's own operations."""
    if ASM:  # one return below (Triton 3.6 builds the statements after a branch's return too)
        low, high = tl.inline_asm_elementwise(
            asm="""
            {
            .reg .b32 lo, hi;
            .reg .b16 lo16, hi16;
            prmt.b32 lo, $2, 0, 0x5420;
            prmt.b32 hi, $2, 0, 0x5431;
            cvt.u16.u32 lo16, lo;
            cvt.u16.u32 hi16, hi;
            cvt.rn.f16x2.e4m3x2 $0, lo16;
            cvt.rn.f16x2.e4m3x2 $1, hi16;
            }
            """,
            constraints="=r,=r,r",
            args=[pairs],
            dtype=(tl.float16, tl.float16),
            is_pure=True,
            pack=2,
        )
    else:
        low = (pairs & 0xFF).to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float16)
        high = ((pairs >> 8) & 0xFF).to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float16)
    return low, high


@triton.jit
def _merge_if_last(
    counters_ptr,
    part_out_ptr,
    part_lse_ptr,
    out_ptr,
    seq,
    kv_head,
    num_kv_heads,
    num_splits,
    num_heads,
    stride_ob,
    stride_oh,
    GROUP: tl.constexpr,
    GROUP_P2: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    MERGE_CHUNK: tl.constexpr,
):
    """The split kernel's own merge (no second kernel): each program of a (sequence, KV head)
    counts itself in once its partials are stored; the one that arrives last combines that KV
    head's query heads over all splits, as _merge_splits_kernel does, then sets the count back
    to zero for the next launch (and the next layer: the buffer is reused).

    The count is one atomic add with acquire-release order at GPU scope, after a barrier: every
    thread's stores of this program come before it, and the last program's loads of the other
    programs' partials come after theirs. Those loads skip L1 (.cg), read from L2."""
    tl.debug_barrier()  # every thread of this program has stored its partials
    counter = counters_ptr + seq * num_kv_heads + kv_head
    arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
    if arrived == num_splits - 1:
        tl.store(counter, 0)
        rows = tl.arange(0, GROUP_P2)
        heads = kv_head * GROUP + rows
        row_ok = rows < GROUP
        dims = tl.arange(0, BLOCK_D)
        dim_ok = dims < HEAD_DIM
        chunk = tl.arange(0, MERGE_CHUNK)
        base = (seq * num_heads + heads) * num_splits  # [GROUP_P2]: each head's first split
        # One pass over the splits, MERGE_CHUNK at a time, with a running largest log-sum-exp
        # (top) as flash attention keeps its running max: each split's output weighs
        # exp2(lse - top), the sums rescaled when top grows. An empty split (lse -inf) weighs 0;
        # a head whose splits are all empty (context 0) keeps top at -inf, every weight 0 and
        # its output 0.
        top = tl.full([GROUP_P2], float("-inf"), dtype=tl.float32)
        total = tl.zeros([GROUP_P2], dtype=tl.float32)
        acc = tl.zeros([GROUP_P2, BLOCK_D], dtype=tl.float32)
        for first in range(0, num_splits, MERGE_CHUNK):
            splits = first + chunk
            ok = row_ok[:, None] & (splits < num_splits)[None, :]
            rows_at = base[:, None] + splits[None, :]  # [GROUP_P2, MERGE_CHUNK]
            lse = tl.load(
                part_lse_ptr + rows_at, mask=ok, other=float("-inf"), cache_modifier=".cg"
            )
            parts = tl.load(
                part_out_ptr + rows_at[:, :, None] * HEAD_DIM + dims[None, None, :],
                mask=ok[:, :, None] & dim_ok[None, None, :],
                other=0.0,
                cache_modifier=".cg",
            )  # [GROUP_P2, MERGE_CHUNK, BLOCK_D]
            new_top = tl.maximum(top, tl.max(lse, 1))
            anchor = tl.where(new_top == float("-inf"), 0.0, new_top)
            rescale = tl.exp2(top - anchor)  # 0 while top is -inf
            weights = tl.exp2(lse - anchor[:, None])
            total = total * rescale + tl.sum(weights, 1)
            acc = acc * rescale[:, None] + tl.sum(parts * weights[:, :, None], 1)
            top = new_top
        out = acc / tl.where(total > 0, total, 1.0)[:, None]
        out_ptrs = out_ptr + seq * stride_ob + heads[:, None] * stride_oh + dims[None, :]
        tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])


@triton.jit(do_not_specialize=["num_splits"])
def _merge_splits_kernel(
    part_out_ptr,  # [B, H, S, D] fp32
    part_lse_ptr,  # [B, H, S] fp32, log2 domain; -inf for an empty split
    out_ptr,  # [B, H, D]
    num_splits,
    stride_ob,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # a few programs: once the partials are there the next kernel may launch
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    seq = tl.program_id(0)
    head = tl.program_id(1)
    num_heads = tl.num_programs(1)
    splits = tl.arange(0, SPLITS_PAD)
    dims = tl.arange(0, BLOCK_D)
    split_ok = splits < num_splits
    dim_ok = dims < HEAD_DIM
    base = (seq * num_heads + head) * num_splits

    lse = tl.load(part_lse_ptr + base + splits, mask=split_ok, other=float("-inf"))
    m = tl.max(lse, 0)
    m = tl.where(m == float("-inf"), 0.0, m)  # all splits empty (context 0): weights all 0
    weights = tl.exp2(lse - m)  # [SPLITS_PAD]
    total = tl.sum(weights, 0)
    parts = tl.load(
        part_out_ptr + (base + splits)[:, None] * HEAD_DIM + dims[None, :],
        mask=split_ok[:, None] & dim_ok[None, :],
        other=0.0,
    )  # [SPLITS_PAD, BLOCK_D]
    out = tl.sum(parts * weights[:, None], 0) / tl.where(total > 0, total, 1.0)
    out_ptrs = out_ptr + seq * stride_ob + head * stride_oh + dims
    tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=dim_ok)
