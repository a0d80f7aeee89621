"""FP8 prefill attention over the FP8 KV cache (engine/attention/cudnn_fp8.py).

On the CPU: the requantization of the pages against one scale (torch, and its Triton kernel under
the interpreter and built for sm_90), the queries' quantization, and the backend's bookkeeping
(the pages written and re-read, queries and keys padded to their buckets, the real lengths, the
bottom-right causal mask, one plan per bucket, short chunks left to the widened path) with an
fp32 reference standing in for cuDNN. On CUDA with cuDNN's frontend: the graph itself against
fp32 attention, exact shapes and padded ones."""

from __future__ import annotations

import importlib.util
import math
import os

import pytest
import torch

from engine.attention import AttentionMetadata
from engine.attention.cudnn_fp8 import (
    KEY_BUCKET,
    QUERY_BUCKET,
    CudnnFp8Backend,
    quantize_queries,
    requantize_pages,
)
from engine.attention.cudnn_split import SHORT_CHUNK_QUERIES
from engine.attention.fp8_kv import Fp8KVBackend, QuantizedPages, quantize_heads
from engine.attention.sdpa import SdpaBackend
from engine.models.fp8 import FP8_DTYPE
from tests.engine.test_fp8_kv import E4M3_RELATIVE, E4M3_SUBNORMAL_STEP, _run_interpreted

BLOCK_SIZE = 16
H, KV, D = 8, 2, 32


def _pages(num_blocks: int, *, seed: int) -> tuple[QuantizedPages, torch.Tensor]:
    """Pages written by quantize_heads from tokens of sizes spread over three decades; the values
    they hold."""
    generator = torch.Generator().manual_seed(seed)
    slots = num_blocks * BLOCK_SIZE
    sizes = torch.logspace(-2, 1, slots)[torch.randperm(slots, generator=generator)]
    x = torch.randn(slots, KV, D, generator=generator) * sizes[:, None, None]
    data, scale = quantize_heads(x)
    pages = QuantizedPages(
        data.view(num_blocks, BLOCK_SIZE, KV, D), scale.view(num_blocks, BLOCK_SIZE, KV)
    )
    values = data.float() * scale[..., None]  # what the pages hold, [slots, KV, D]
    return pages, values.view(num_blocks, BLOCK_SIZE, KV, D)


def test_requantized_pages_hold_their_values_within_e4m3_rounding() -> None:
    pages, values = _pages(6, seed=0)
    table = torch.tensor([4, 0, 5, 2])
    tokens, rows = 3 * BLOCK_SIZE + 5, 5 * BLOCK_SIZE
    data, descale = requantize_pages(pages, table, tokens, rows)
    assert data.dtype == FP8_DTYPE and data.shape == (rows, KV, D)
    assert descale.shape == (1, 1, 1, 1)
    held = values[table].reshape(-1, KV, D)[:tokens]
    # The one scale is the largest of the tokens' own: nothing past E4M3's 448.
    assert descale.item() == pages.scale[table].reshape(-1, KV)[:tokens].max().item()
    got = data[:tokens].float() * descale.item()
    # Each value within 2**-4 of itself, or within the subnormal step of the one scale.
    bound = torch.maximum(
        held.abs() * E4M3_RELATIVE, torch.full_like(held, E4M3_SUBNORMAL_STEP * descale.item())
    )
    assert ((got - held).abs() <= bound).all()
    assert (data[tokens:].float() == 0).all()  # padding keys are zeros, never NaN


def test_queries_quantized_against_one_scale() -> None:
    q = torch.randn(40, H, D, dtype=torch.bfloat16) * 3
    data, descale = quantize_queries(q, 64)
    assert data.shape == (64, H, D) and (data[40:].float() == 0).all()
    assert data[:40].float().abs().max().item() == 448.0  # the largest |q| maps to E4M3's max
    got, wanted = data[:40].float() * descale.item(), q.float()
    bound = torch.maximum(
        wanted.abs() * E4M3_RELATIVE, torch.full_like(wanted, E4M3_SUBNORMAL_STEP * descale.item())
    )
    assert ((got - wanted).abs() <= bound).all()


def _reference_graph(calls: list):
    """A stand-in for SdpaGraph (what cuDNN's graph computes): fp32 attention of the E4M3 inputs
    times their descales, the first num_q queries against the first num_k keys, bottom-right
    causal; rows past num_q NaN (the caller must cut them)."""

    def factory(num_q_pad, num_k_pad, heads, kv_heads, head_dim, out_dtype):
        calls.append((num_q_pad, num_k_pad))

        def run(q, k, v, num_q, num_k, descales):
            assert q.shape == (num_q_pad, heads, head_dim) and k.shape == (
                num_k_pad,
                kv_heads,
                head_dim,
            )
            dq, dk, dv = (d.item() for d in descales)
            qq = q[:num_q].float() * dq
            kk = (k[:num_k].float() * dk).repeat_interleave(heads // kv_heads, dim=1)
            vv = (v[:num_k].float() * dv).repeat_interleave(heads // kv_heads, dim=1)
            scores = torch.einsum("thd,shd->hts", qq, kk) / math.sqrt(head_dim)
            seen = torch.arange(num_k)[None, :] <= torch.arange(num_q)[:, None] + (num_k - num_q)
            scores = scores.masked_fill(~seen, float("-inf"))
            out = torch.full((num_q_pad, heads, head_dim), float("nan"))
            out[:num_q] = torch.einsum("hts,shd->thd", scores.softmax(-1), vv)
            return out.to(out_dtype)

        return run

    return factory


def _chunks(backend, pages_k, pages_v, q, k, v, table, chunks) -> torch.Tensor:
    outs = []
    for start, end in chunks:
        positions = torch.arange(start, end)
        slots = table[positions // BLOCK_SIZE].long() * BLOCK_SIZE + positions % BLOCK_SIZE
        meta = AttentionMetadata(
            start=start,
            num_query_tokens=end - start,
            slot_mapping=slots,
            block_table=table,
            block_size=BLOCK_SIZE,
        )
        meta = backend.prepare(meta)
        outs.append(
            backend.forward(q[start:end], k[start:end], v[start:end], pages_k, pages_v, meta)
        )
    return torch.cat(outs)


def test_backend_attends_long_chunks_in_fp8_and_short_ones_widened() -> None:
    """A 900-token prompt in chunks of 300, 340 and 260 (the last short of a query bucket; the
    second ends past a key bucket) and a 6-token question after it, over pages in shuffled
    blocks: the FP8 path (reference standing in for cuDNN) gives the widened path's outputs
    within FP8's rounding of Q, K and V, with one plan per (query bucket, key bucket)."""
    torch.manual_seed(0)
    total = 906
    q = torch.randn(total, H, D, dtype=torch.bfloat16)
    k = torch.randn(total, KV, D, dtype=torch.bfloat16)
    v = torch.randn(total, KV, D, dtype=torch.bfloat16)
    num_blocks = -(-total // BLOCK_SIZE)
    table = torch.randperm(num_blocks + 4)[:num_blocks].to(torch.int32)
    chunks = [(0, 300), (300, 640), (640, 900), (900, 906)]

    def run(backend):
        pages = [
            QuantizedPages(
                torch.zeros(num_blocks + 4, BLOCK_SIZE, KV, D).to(FP8_DTYPE),
                torch.zeros(num_blocks + 4, BLOCK_SIZE, KV),
            )
            for _ in range(2)
        ]
        return _chunks(backend, *pages, q, k, v, table, chunks)

    calls: list = []
    ours = run(
        CudnnFp8Backend(SdpaBackend(torch.device("cpu")), graph_factory=_reference_graph(calls))
    )
    widened = run(Fp8KVBackend(SdpaBackend(torch.device("cpu"))))
    assert ours.shape == widened.shape == (total, H, D) and ours.isfinite().all()
    # Three long chunks, three plans: their query and key buckets (the short question none).
    assert all(n > SHORT_CHUNK_QUERIES for n in (300, 340, 260))
    assert calls == [(QUERY_BUCKET, KEY_BUCKET)]  # one plan served all three
    # The question went the widened way: the same numbers.
    assert torch.equal(ours[900:], widened[900:])
    # Three more roundings than the widened path: Q's, and K's and V's second one against a
    # single scale (a token whose scale is not the largest is rounded again), each relative
    # error uniform within 2**-4, RMS 2**-4 / sqrt(3); summed as if aligned they bound the
    # output's (measured 4.7%). A misplaced diagonal, a wrong scale or a padded key seen gives
    # tens of percent.
    err = (
        (ours[:900].float() - widened[:900].float()).norm() / widened[:900].float().norm()
    ).item()
    assert 0 < err <= 3 * E4M3_RELATIVE / math.sqrt(3), err


def test_a_shape_cudnn_declines_goes_the_widened_way_once() -> None:
    """A plan cuDNN will not build: that chunk (and the next of the same buckets, without asking
    again) attends through the widened path, the same numbers as Fp8KVBackend's."""
    torch.manual_seed(1)
    total, tried = 600, []

    def declining(*key):
        tried.append(key)
        raise RuntimeError("no engine proposed a plan for this graph")

    q = torch.randn(total, H, D)
    k, v = torch.randn(total, KV, D), torch.randn(total, KV, D)
    num_blocks = -(-total // BLOCK_SIZE)
    table = torch.arange(num_blocks, dtype=torch.int32)

    def run(backend):
        pages = [
            QuantizedPages(
                torch.zeros(num_blocks, BLOCK_SIZE, KV, D).to(FP8_DTYPE),
                torch.zeros(num_blocks, BLOCK_SIZE, KV),
            )
            for _ in range(2)
        ]
        return _chunks(backend, *pages, q, k, v, table, [(0, 300), (300, 600)])

    ours = run(CudnnFp8Backend(SdpaBackend(torch.device("cpu")), graph_factory=declining))
    assert torch.equal(ours, run(Fp8KVBackend(SdpaBackend(torch.device("cpu")))))
    assert len(tried) == 1  # both chunks share the buckets: asked once


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (dev extra)")
def test_fused_requantize_matches_the_torch_path_interpreted() -> None:
    """The one-kernel requantization (CUDA's path) under Triton's interpreter writes the bytes
    of requantize_pages' torch path, padding rows zero."""
    from tests.engine.run_fp8_requantize_interpreted import SHAPES

    results = _run_interpreted("tests.engine.run_fp8_requantize_interpreted")
    assert len(results) == len(SHAPES)
    assert all(r["same"] and r["padding_zero"] for r in results), results


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (dev extra)")
def test_fused_requantize_builds_for_hopper() -> None:
    """Ahead of time (Triton's bundled ptxas): the requantization builds for sm_90 at the 8B's
    shape, its ratio an IEEE division and its cast to E4M3 rounding to nearest, as torch's."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.attention.fp8_kv_kernels import _requantize_pages_kernel as fn
    from tests.engine.test_fp8_kv import _sm90_ptx

    constexprs = {"NUM_KV_HEADS": 8, "KV_PAD": 8, "HEAD_DIM": 128, "BLOCK_D": 128, "BLOCK_SIZE": 16}
    kinds = {
        "data_ptr": "*fp8e4nv",
        "scale_ptr": "*fp32",
        "table_ptr": "*i64",
        "descale_ptr": "*fp32",
        "out_ptr": "*fp8e4nv",
        "fp8_max": "fp32",
    }
    ptx = _sm90_ptx(fn, kinds, constexprs, num_warps=4)
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx
    divisions = {line.split()[0] for line in ptx.splitlines() if line.strip().startswith("div.")}
    assert divisions == {"div.rn.f32"}, divisions


def _cudnn_fp8_ready() -> bool:
    if not torch.cuda.is_available():
        return False
    from engine.attention.cudnn_fp8 import is_fp8_attention_available

    return is_fp8_attention_available(torch.device("cuda"))


@pytest.mark.skipif(
    not _cudnn_fp8_ready(),
    reason="needs CUDA on Hopper or newer and cuDNN's frontend with sdpa_fp8",
)
@pytest.mark.parametrize("padded", [False, True])
def test_cudnn_graph_matches_fp32_attention_cuda(padded: bool) -> None:
    """cuDNN's sdpa_fp8 (8 query heads on 2 KV heads of 128) against fp32 attention over the same
    E4M3 inputs: within what P's E4M3 rounding (2**-4 a probability) leaves on the output; padded,
    the real lengths from tensors and the padding never seen."""
    from engine.attention.cudnn_fp8 import SdpaGraph

    torch.manual_seed(0)
    num_q, num_k = (200, 1000) if padded else (256, 1024)
    rows, keys = (256, 1536) if padded else (num_q, num_k)
    graph = SdpaGraph(
        num_q=rows,
        num_k=keys,
        num_heads=8,
        num_kv_heads=2,
        head_dim=128,
        fp8=True,
        out_dtype=torch.bfloat16,
    )
    q = torch.randn(rows, 8, 128, device="cuda")
    k = torch.randn(keys, 2, 128, device="cuda")
    v = torch.randn(keys, 2, 128, device="cuda")
    if padded:  # garbage past the real lengths: it must not be seen
        k[num_k:], v[num_k:] = 1e4, float("nan")
    q8, dq = quantize_queries(q[:num_q], rows)
    k8, v8 = (x.clamp(-448, 448).to(FP8_DTYPE) for x in (k * 100, v * 100))
    one = torch.full((1, 1, 1, 1), 0.01, device="cuda")
    out = graph(q8, k8, v8, num_q, num_k, (dq, one, one))[:num_q].float()
    kk = (k8[:num_k].float() * 0.01).repeat_interleave(4, dim=1)
    vv = (v8[:num_k].float() * 0.01).repeat_interleave(4, dim=1)
    scores = torch.einsum("thd,shd->hts", q8[:num_q].float() * dq.item(), kk) / math.sqrt(128)
    seen = torch.arange(num_k, device="cuda")[None, :] <= torch.arange(num_q, device="cuda")[
        :, None
    ] + (num_k - num_q)
    expected = torch.einsum(
        "hts,shd->thd", scores.masked_fill(~seen, float("-inf")).softmax(-1), vv
    )
    err = ((out - expected).norm() / expected.norm()).item()
    assert out.isfinite().all() and err <= 2 * E4M3_RELATIVE, err


@pytest.mark.skipif(
    not _cudnn_fp8_ready(),
    reason="needs CUDA on Hopper or newer and cuDNN's frontend with sdpa_fp8",
)
def test_engine_prefills_long_chunks_in_fp8_cuda(tmp_path) -> None:
    """The engine with the FP8 cache and fp8_attention: chunks of 512 queries go through cuDNN's
    FP8 attention (a model of head dim 128), and the prefill's logits stay within twice the FP8
    cache's allowance of the unquantized cache's: the cache rounds K and V once; FP8 attention
    rounds Q, K and V again, P and the output, five more roundings of the same size, which add
    about sqrt(7 / 2) < 2 times the error if independent."""
    from tests.engine.conftest import save_tiny_model, tiny_engine
    from tests.engine.test_fp8_kv import LOGITS_REL_L2, _prompt, _rel_l2

    # Weights of std 0.035: test_fp8_kv's 0.1 at width 64, scaled by sqrt(64 / 512) to this
    # width (at 0.1 this wider model is chaotic: the FP8 cache alone moved its logits 21%).
    save_tiny_model(
        tmp_path, "llama", initializer_range=0.035, hidden_size=512, head_dim=128,
        max_position_embeddings=2048,
    )  # fmt: skip
    options = {
        "device": "cuda",
        "dtype": "bfloat16",
        "chunk_size": 512,
        "max_kv_cache_bytes": 16 << 20,
    }
    ours = tiny_engine(tmp_path, kv_dtype="fp8", fp8_attention=True, **options)
    assert ours.attention_backend.endswith("+fp8")
    unquantized = tiny_engine(tmp_path, **options)
    prompt = _prompt(1100, 3)  # chunks of 512, 512 (FP8 attention) and 76 (widened)
    got = ours.prefill_logits(prompt, chunk_size=512, all_positions=True).float()
    expected = unquantized.prefill_logits(prompt, chunk_size=512, all_positions=True).float()
    assert got.isfinite().all()
    assert 0 < _rel_l2(got, expected) <= 2 * LOGITS_REL_L2
