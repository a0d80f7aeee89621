"""FP8 prefill attention through cuDNN (engine/attention/cudnn_fp8.py).

On the CPU: the per-tensor quantization, and Fp8Attend inside the cuDNN split backend with an
fp32 reference standing in for cuDNN's graph (the layouts, scales, log-sum-exps, one plan per
shape), against the same split over the unrounded inputs. On CUDA with cuDNN's frontend: the
graph against fp32 attention, both masks, and the engine's prefill logits with it."""

from __future__ import annotations

import importlib.util
import math
from typing import ClassVar

import pytest
import torch

from engine.attention import cudnn_fp8
from engine.attention.cudnn_fp8 import MIN_FP8_KEYS, Fp8Attend, quantize_tensor
from engine.attention.cudnn_split import CudnnSplitBackend, math_attend
from engine.models.fp8 import FP8_DTYPE
from tests.engine.test_attention import BLOCK_SIZE, _run_chunks
from tests.engine.test_fp8_kv import E4M3_RELATIVE, E4M3_SUBNORMAL_STEP

H, KV, D = 8, 2, 32


def test_tensors_quantized_against_one_scale_in_token_major_memory() -> None:
    x = (torch.randn(2, H, 40, D) * 3).transpose(1, 2).contiguous().transpose(1, 2)  # a view
    data, descale = quantize_tensor(x.bfloat16())
    assert data.dtype == FP8_DTYPE and data.shape == x.shape and descale.shape == (1, 1, 1, 1)
    assert data.transpose(1, 2).is_contiguous()  # (batch, sequence, head, dim) memory
    assert data.float().abs().max().item() == 448.0  # the largest |x| maps to E4M3's max
    got, wanted = data.float() * descale.item(), x.bfloat16().float()
    floor = torch.full_like(wanted, E4M3_SUBNORMAL_STEP * descale.item())
    assert ((got - wanted).abs() <= torch.maximum(wanted.abs() * E4M3_RELATIVE, floor)).all()


class ReferenceGraph:
    """A stand-in for Fp8SdpaGraph (what cuDNN's graph computes): fp32 attention of the E4M3
    inputs times their descales, grouped KV heads, no mask or top-left causal; the output in
    out_dtype, the log-sum-exps of the scaled scores (natural log)."""

    built: ClassVar[list] = []

    def __init__(
        self, batch, num_heads, num_q, num_kv_heads, num_k, head_dim, causal, out_dtype, device
    ):
        ReferenceGraph.built.append((num_q, num_k, causal))
        self.causal, self.out_dtype, self.group = causal, out_dtype, num_heads // num_kv_heads

    def __call__(self, q, k, v):
        (q8, dq), (k8, dk), (v8, dv) = q, k, v
        assert q8.dtype == k8.dtype == v8.dtype == FP8_DTYPE
        qq = q8.float() * dq.item()
        kk = (k8.float() * dk.item()).repeat_interleave(self.group, dim=1)
        vv = (v8.float() * dv.item()).repeat_interleave(self.group, dim=1)
        scores = torch.einsum("bnld,bnsd->bnls", qq, kk) / math.sqrt(qq.shape[-1])
        if self.causal:
            keep = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
            scores = scores.masked_fill(~keep, float("-inf"))
        lse = scores.logsumexp(-1)
        out = torch.einsum("bnls,bnsd->bnld", (scores - lse[..., None]).exp(), vv)
        return out.to(self.out_dtype), lse


def _fp8_against_exact(num_tokens: int, table, chunks, *, num_sms: int) -> float:
    """A random sequence of num_tokens (from torch's seeded generator) in chunks through the
    split backend with Fp8Attend (ReferenceGraph standing in for cuDNN) and with exact
    attention: the relative L2 error of the first against the second."""
    q, k, v = (
        torch.randn(num_tokens, H, D),
        torch.randn(num_tokens, KV, D),
        torch.randn(num_tokens, KV, D),
    )
    fp8 = CudnnSplitBackend(
        torch.device("cpu"),
        attend=Fp8Attend(fallback=math_attend, graph_factory=ReferenceGraph, min_keys=0),
        num_sms=num_sms,
    )
    exact = CudnnSplitBackend(torch.device("cpu"), attend=math_attend, num_sms=num_sms)
    num_blocks = max(16, len(table))
    ours, expected = (
        torch.cat(_run_chunks(backend, chunks, table, k, v, q, num_blocks))
        for backend in (fp8, exact)
    )
    return ((ours - expected).norm() / expected.norm()).item()


def test_split_backend_attends_in_fp8_within_its_roundings() -> None:
    """Fp8Attend in the split backend (a first chunk, then chunks after a cached prefix, blocks
    shuffled) against the same backend over the unrounded inputs: within the three roundings of
    Q, K and V (each relative error uniform within 2**-4, RMS 2**-4 / sqrt(3); summed as if
    aligned they bound the output's). A misplaced mask or scale, or a wrong merge weight, gives
    tens of percent. One plan per shape: the causal square and the prefix part of each chunk."""
    torch.manual_seed(0)
    num_tokens = 26
    table = torch.tensor([9, 2, 14, 0, 5, 11, 7], dtype=torch.int32)
    chunks = [(0, 9), (9, 17), (17, 26)]
    ReferenceGraph.built = []
    err = _fp8_against_exact(num_tokens, table, chunks, num_sms=1)
    assert 0 < err <= 3 * E4M3_RELATIVE / math.sqrt(3), err
    # The first chunk: its square alone; the next two: a square of 8 and 9 and a prefix of 9, 17.
    assert sorted(set(ReferenceGraph.built)) == sorted(
        {(9, 9, True), (8, 8, True), (4 * 8, 9, False), (9, 9, True), (4 * 9, 17, False)}
    )


def test_one_plan_per_shape() -> None:
    ReferenceGraph.built = []
    attend = Fp8Attend(fallback=math_attend, graph_factory=ReferenceGraph, min_keys=0)
    q, kv = torch.randn(1, H, 12, D), torch.randn(1, KV, 30, D)
    for _ in range(3):
        attend(q, kv, kv, False)
    attend(q, q, q, True)
    assert ReferenceGraph.built == [(12, 30, False), (12, 12, True)]


def test_calls_with_few_keys_stay_in_bf16() -> None:
    """Below min_keys (default MIN_FP8_KEYS, where FP8 stops paying) a call goes to the bf16
    kernel as it is, and no graph is built for it; from min_keys on, FP8."""
    ReferenceGraph.built = []
    attend = Fp8Attend(fallback=math_attend, graph_factory=ReferenceGraph, min_keys=30)
    assert Fp8Attend(fallback=math_attend).min_keys == MIN_FP8_KEYS
    q, short, long = torch.randn(1, H, 12, D), torch.randn(1, H, 29, D), torch.randn(1, H, 30, D)
    out, lse = attend(q, short, short, False)
    expected, expected_lse = math_attend(q, short, short, False)
    assert torch.equal(out, expected) and torch.equal(lse, expected_lse)
    assert ReferenceGraph.built == []
    attend(q, long, long, False)
    assert ReferenceGraph.built == [(12, 30, False)]  # (queries, keys, causal)


def test_a_shape_cudnn_declines_goes_to_the_fallback_once() -> None:
    """A graph cuDNN will not plan: the call goes to the bf16 kernel (the same numbers), and the
    shape is not built again."""
    tried = []

    def declining(*key):
        tried.append(key)
        raise RuntimeError("no engine proposed a plan for this graph")

    attend = Fp8Attend(fallback=math_attend, graph_factory=declining, min_keys=0)
    q, kv = torch.randn(1, H, 12, D), torch.randn(1, H, 30, D)  # as the split backend calls it
    for _ in range(2):
        out, lse = attend(q, kv, kv, False)
        expected, expected_lse = math_attend(q, kv, kv, False)
        assert torch.equal(out, expected) and torch.equal(lse, expected_lse)
    assert len(tried) == 1


def test_long_chunks_padded_and_prefix_splits_in_fp8() -> None:
    """Chunks past SHORT_CHUNK_QUERIES (padded to the query bucket) and a short one after a long
    prefix (its keys split as a batch for idle SMs) through Fp8Attend: within the roundings'
    bound of the exact split, the FP8 graphs built with those shapes (batch > 1 for the splits)."""
    from engine.attention.cudnn_split import QUERY_BUCKET, SHORT_CHUNK_QUERIES

    torch.manual_seed(3)
    num_tokens = 2700
    table = torch.arange(-(-num_tokens // BLOCK_SIZE), dtype=torch.int32)
    chunks = [(0, 1300), (1300, 2400), (2400, 2700)]
    ReferenceGraph.built = []
    err = _fp8_against_exact(num_tokens, table, chunks, num_sms=64)
    assert 0 < err <= 3 * E4M3_RELATIVE / math.sqrt(3), err
    padded = -(-1300 // QUERY_BUCKET) * QUERY_BUCKET
    assert (padded, padded, True) in ReferenceGraph.built  # the first chunk, padded
    # The last chunk (long too: padded to 512) has 4 x 512 folded rows a KV head, 32 programs for
    # 64 SMs, so its 2400 prefix keys go as 2 splits of 1200, a batch of 2 in one call.
    assert SHORT_CHUNK_QUERIES < 300 and (4 * 512, 1200, False) in ReferenceGraph.built


def _cudnn_fp8_ready() -> bool:
    if not torch.cuda.is_available():
        return False
    from engine.attention.cudnn_fp8 import is_fp8_attention_available

    return is_fp8_attention_available(torch.device("cuda"))


needs_cudnn_fp8 = pytest.mark.skipif(
    not _cudnn_fp8_ready(),
    reason="needs CUDA on Hopper or newer and cuDNN's frontend with sdpa_fp8",
)


@needs_cudnn_fp8
@pytest.mark.parametrize("causal", [False, True])
def test_cudnn_graph_matches_fp32_attention_cuda(causal: bool) -> None:
    """cuDNN's sdpa_fp8 against fp32 attention over the same E4M3 inputs, called as the split
    backend calls it: the prefix part (query heads folded onto 2 KV heads, its keys split as a
    batch of 2) without a mask, the chunk itself (8 heads) causal. Within two E4M3 roundings
    (P's and the output's, 2**-4 each); log-sum-exps within 1e-3."""
    torch.manual_seed(0)
    batch, heads, num_q, num_k = (1, 8, 512, 512) if causal else (2, 2, 2048, 768)
    q = torch.randn(batch, heads, num_q, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, heads, num_k, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(batch, heads, num_k, 128, device="cuda", dtype=torch.bfloat16)

    def declined(*_args):
        raise AssertionError("cuDNN declined a shape the engine uses")

    out, lse = Fp8Attend(fallback=declined, min_keys=0)(q, k, v, causal)
    reference = ReferenceGraph(batch, heads, num_q, heads, num_k, 128, causal, torch.float32, None)
    inputs = (tuple(t.cpu() for t in quantize_tensor(x)) for x in (q, k, v))
    expected, expected_lse = reference(*inputs)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    err = ((out.float().cpu() - expected).norm() / expected.norm()).item()
    assert err <= 2 * E4M3_RELATIVE, err
    assert (lse.cpu() - expected_lse).abs().max().item() <= 1e-3


@needs_cudnn_fp8
def test_engine_prefills_long_chunks_in_fp8_cuda(tmp_path, monkeypatch) -> None:
    """The engine with the FP8 cache and fp8_attention: chunks of 512 queries go through cuDNN's
    FP8 attention (a model of head dim 128), and the prefill's logits stay within twice the FP8
    cache's allowance of the unquantized cache's: the cache rounds K and V once; FP8 attention
    rounds Q, K and V again, P and the output, five more roundings of the same size, which add
    about sqrt(7 / 2) < 2 times the error if independent."""
    from tests.engine.conftest import save_tiny_model, tiny_engine
    from tests.engine.test_fp8_kv import LOGITS_REL_L2, _prompt, _rel_l2

    monkeypatch.setattr(cudnn_fp8, "MIN_FP8_KEYS", 0)  # this model's chunks are short

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
        "attention_backend": "cudnn",
    }
    ours = tiny_engine(tmp_path, kv_dtype="fp8", fp8_attention=True, **options)
    assert ours.attention_backend == "cudnn+fp8"
    unquantized = tiny_engine(tmp_path, **options)
    prompt = _prompt(1100, 3)  # chunks of 512, 512 (FP8 attention) and 76 (efficient kernel)
    got = ours.prefill_logits(prompt, chunk_size=512, all_positions=True).float()
    expected = unquantized.prefill_logits(prompt, chunk_size=512, all_positions=True).float()
    assert got.isfinite().all()
    assert 0 < _rel_l2(got, expected) <= 2 * LOGITS_REL_L2


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (dev extra)")
def test_fused_quantize_matches_the_torch_path_interpreted() -> None:
    """The one-pass rounding (CUDA's path) under Triton's interpreter writes the bytes of
    quantize_tensor's torch path, from strided and contiguous inputs, bf16 and fp16."""
    from tests.engine.run_cudnn_fp8_quantize_interpreted import SHAPES
    from tests.engine.test_fp8_kv import _run_interpreted

    results = _run_interpreted("tests.engine.run_cudnn_fp8_quantize_interpreted")
    assert len(results) == len(SHAPES) and all(r["same"] for r in results), results


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (dev extra)")
def test_fused_quantize_builds_for_hopper() -> None:
    """Ahead of time (Triton's bundled ptxas): the rounding builds for sm_90 at the prefix
    part's shape (8 KV heads of 128), dividing as torch (IEEE) and rounding to nearest."""
    import os

    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.attention.cudnn_fp8_kernels import _quantize_kernel as fn
    from tests.engine.test_fp8_kv import _assert_rounds_as_torch, _sm90_ptx

    constexprs = {"NUM_HEADS": 8, "HEADS_PAD": 8, "HEAD_DIM": 128, "BLOCK_D": 128}
    kinds = {"x_ptr": "*bf16", "descale_ptr": "*fp32", "out_ptr": "*fp8e4nv", "fp8_max": "fp32"}
    _assert_rounds_as_torch(_sm90_ptx(fn, kinds, constexprs, num_warps=4))


@pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or not torch.cuda.is_available(),
    reason="needs a CUDA device (and triton)",
)
def test_fused_quantize_matches_the_torch_path_cuda() -> None:
    from tests.engine.run_cudnn_fp8_quantize_interpreted import SHAPES, check

    for shape in SHAPES:
        assert check(*shape, torch.device("cuda"))["same"], shape
