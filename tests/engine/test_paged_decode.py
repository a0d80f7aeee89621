"""The paged decode attention kernel against its torch reference, and the reference against SDPA.

On this CPU the Triton kernel runs under Triton's interpreter, in a subprocess started once per
module (TRITON_INTERPRET=1 must be set before triton decorates the kernel; see
run_paged_decode_interpreted.py); each case of paged_decode_cases.py is then one test. Where a
CUDA device is present the same cases run on it, and a CUDA graph is replayed with new context
lengths and block tables in its captured buffers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from engine.attention.paged_decode import (
    FP8_V_PAIRS,
    MAX_SPLITS,
    KernelConfig,
    default_kernel_config,
    is_paged_decode_available,
    paged_decode_attention,
    paged_decode_reference,
    plan_num_splits,
    prebuild,
    prebuild_split_counts,
)
from engine.errors import EngineError
from tests.engine.paged_decode_cases import CASES, TOLERANCE, Case, build_inputs, run_case

ROOT = Path(__file__).resolve().parents[2]
HAS_TRITON = importlib.util.find_spec("triton") is not None
NO_TRITON = "triton is not installed (the dev extra): the kernel cannot run under its interpreter"
needs_cuda = pytest.mark.skipif(
    not (HAS_TRITON and torch.cuda.is_available()), reason="needs a CUDA device and triton"
)


@pytest.fixture(scope="module")
def interpreted_results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not HAS_TRITON:
        pytest.skip(NO_TRITON)
    out = tmp_path_factory.mktemp("paged_decode") / "results.json"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.engine.run_paged_decode_interpreted", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def _assert_case_passed(result: dict) -> None:
    assert "error" not in result, result.get("error")
    assert not result["has_nan"]
    assert result["tolerance_ratio"] <= 1.0, result
    assert result["wrote_into_out"]
    assert result["padding_rows_zero"]
    assert not result["reference_has_nan"]
    assert result.get("counters_zero", True)
    assert result.get("same_again", True)
    assert result["v_pairs_ran"]


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_reference_interpreted(name: str, interpreted_results: dict) -> None:
    _assert_case_passed(interpreted_results[name])


@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
def test_fused_write_puts_each_row_in_its_slot_interpreted(interpreted_results: dict) -> None:
    """The decode step's one-kernel K and V write matches index_copy_ (padded heads and head
    dimension, V a strided view, shuffled slots), under the interpreter."""
    assert interpreted_results["write_slots_fused"] == {"k_equal": True, "v_equal": True}


@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
def test_fused_write_builds_for_hopper_with_16_byte_stores() -> None:
    """Ahead of time for sm_90, specialized as a decode step launches it (pointers and strides
    divisible by 16): each lane moves 16 bytes a load and a store."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from engine.attention import slot_write_kernels

    fn = slot_write_kernels._write_slots_kernel
    constexprs = {"NUM_KV_HEADS": 8, "KV_PAD": 8, "HEAD_DIM": 128, "BLOCK_D": 128, "USE_PDL": False}
    signature = {
        name: "constexpr" if name in constexprs else "*i64" if name == "slot_ptr" else
        "*bf16" if name.endswith("_ptr") else "i32"
        for name in fn.arg_names
    }  # fmt: skip
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names) if n[0] in "kvs"}
    built = triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": 1},
    )
    ptx = built.asm["ptx"]
    assert re.search(r"ld\.global(\.\w+)*\.v4\.b32", ptx), "no 16-byte loads"
    assert re.search(r"st\.global(\.\w+)*\.v4\.b32", ptx), "no 16-byte stores"


@needs_cuda
def test_fused_write_matches_index_copy_cuda() -> None:
    """On CUDA, write_slots (the decode step's write: one Triton kernel) stores what
    index_copy_ stores, K contiguous and V a view of the fused projection."""
    from engine.attention.decode import write_slots

    device = torch.device("cuda")
    tokens, heads, kv, dim = 7, 32, 8, 128
    k = torch.randn(tokens, kv, dim, device=device, dtype=torch.bfloat16)
    qkv = torch.randn(tokens, (heads + 2 * kv) * dim, device=device, dtype=torch.bfloat16)
    v = qkv[:, (heads + kv) * dim :].view(tokens, kv, dim)
    slots = torch.randperm(64, device=device)[:tokens]
    k_cache, v_cache = (torch.zeros(4, 16, kv, dim, device=device, dtype=k.dtype) for _ in "kv")
    write_slots(k, v, k_cache, v_cache, slots)
    k_ref, v_ref = torch.zeros_like(k_cache), torch.zeros_like(v_cache)
    k_ref.view(-1, kv, dim).index_copy_(0, slots, k)
    v_ref.view(-1, kv, dim).index_copy_(0, slots, v)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)


@needs_cuda
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_reference_cuda(name: str) -> None:
    _assert_case_passed(run_case(CASES[name], torch.device("cuda")))


@needs_cuda
def test_cuda_graph_replays_new_lengths_and_tables() -> None:
    """Captured once; replayed after new q, context lens and block table rows were copied into
    the same buffers (rows permuted, one shortened), it matches the reference on the new ones."""
    case = Case(32, 8, 128, torch.bfloat16, (1000, 17, 0, 300))
    inputs = build_inputs(case, torch.device("cuda"))
    max_context_len = inputs["block_tables"].shape[1] * case.block_size
    out = torch.empty_like(inputs["q"])

    def step() -> None:
        paged_decode_attention(**inputs, max_context_len=max_context_len, out=out)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # compiles the kernels outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    perm = torch.tensor([3, 0, 2, 1], device="cuda")
    new_lens = inputs["context_lens"][perm] - torch.tensor([50, 0, 0, 0], device="cuda").int()
    inputs["block_tables"].copy_(inputs["block_tables"][perm].clone())
    inputs["context_lens"].copy_(new_lens)
    inputs["q"].copy_(torch.randn_like(inputs["q"]))
    graph.replay()
    expected = paged_decode_reference(**inputs)
    atol, rtol = TOLERANCE[case.dtype]
    torch.testing.assert_close(out.float(), expected.float(), atol=atol, rtol=rtol)


def _sdpa_per_sequence(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Each sequence's keys gathered densely ([L, KV, D], no padding), then SDPA in fp32."""
    q, table = inputs["q"].float(), inputs["block_tables"].long()
    block_size = inputs["k_cache"].shape[1]
    rows = []
    for row, length in enumerate(inputs["context_lens"].tolist()):
        if length == 0:
            rows.append(torch.zeros_like(q[row]))
            continue
        pages = table[row, : -(-length // block_size)]
        keys, values = (
            c[pages].flatten(0, 1)[:length].float().transpose(0, 1)[None]  # [1, KV, L, D]
            for c in (inputs["k_cache"], inputs["v_cache"])
        )
        query = q[row][None, :, None]  # [1, H, 1, D]
        rows.append(F.scaled_dot_product_attention(query, keys, values, enable_gqa=True)[0, :, 0])
    return torch.stack(rows)  # [B, H, D]


@pytest.mark.parametrize(
    ("num_heads", "num_kv_heads", "head_dim", "dtype"),
    [
        (9, 3, 64, torch.float32),
        (8, 2, 128, torch.float32),
        (4, 4, 64, torch.float32),
        (32, 8, 128, torch.bfloat16),
    ],
)
def test_reference_matches_sdpa(
    num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype
) -> None:
    case = Case(num_heads, num_kv_heads, head_dim, dtype, (1, 15, 16, 17, 100, 1000, 0))
    inputs = build_inputs(case, torch.device("cpu"))
    got = paged_decode_reference(**inputs)
    expected = _sdpa_per_sequence(inputs).to(dtype)
    assert not got.isnan().any()
    atol, rtol = TOLERANCE[dtype]
    torch.testing.assert_close(got.float(), expected.float(), atol=atol, rtol=rtol)
    assert (got[inputs["context_lens"] == 0] == 0).all()


def test_reference_writes_into_out_with_a_custom_scale() -> None:
    inputs = build_inputs(Case(4, 2, 64, torch.float32, (30, 0)), torch.device("cpu"))
    out = torch.full_like(inputs["q"], float("nan"))
    got = paged_decode_reference(**inputs, scale=0.5, out=out)
    assert got.data_ptr() == out.data_ptr()
    default = paged_decode_reference(**inputs)
    assert not torch.allclose(got[0], default[0])  # the scale is used
    assert (got[1] == 0).all()


H200_SMS = 132


@pytest.mark.parametrize(
    ("batch_size", "max_context_len", "expected"),
    [
        (1, 32768, 66),  # 8 programs -> 4 x 132 = 528 programs
        (1, 4096, 32),  # capped at 4096 / 128 tokens per split
        (16, 8192, 5),
        (64, 4096, 2),  # 512 programs: two splits
        (64, 32768, 8),  # at most 4,096 tokens a split: a long sequence never runs alone
        (40, 65536, 16),  # a 33K question among 8K summaries (context bucket 64K)
        (1, 100, 1),  # one short split
        (1, 10**7, 128),  # capped at MAX_SPLITS
    ],
)
def test_plan_num_splits(batch_size: int, max_context_len: int, expected: int) -> None:
    got = plan_num_splits(
        batch_size=batch_size, num_kv_heads=8, max_context_len=max_context_len, num_sms=H200_SMS
    )
    assert got == expected
    many_sms = plan_num_splits(
        batch_size=batch_size, num_kv_heads=8, max_context_len=max_context_len, num_sms=10**5
    )
    assert many_sms == min(MAX_SPLITS, -(-max_context_len // 128))


def test_prebuild_covers_every_variant_a_step_can_launch() -> None:
    """prebuild's split counts reach one split and every merge pad (SPLITS_PAD) of 2 to
    MAX_SPLITS splits: each compiles a variant Triton would otherwise build inside a step."""
    counts = prebuild_split_counts()
    pads = {1 if n == 1 else 1 << (n - 1).bit_length() for n in counts}
    every = {1 if n == 1 else 1 << (n - 1).bit_length() for n in range(1, MAX_SPLITS + 1)}
    assert pads == every and len(counts) == len(pads)


def _compiled_variants() -> int:
    from engine.attention import paged_decode_kernels as kernels
    from engine.attention import slot_write_kernels

    total = 0
    for fn in (
        kernels._paged_decode_split_kernel,
        kernels._merge_splits_kernel,
        slot_write_kernels._write_slots_kernel,
    ):
        for cache in fn.device_caches.values():
            total += len(cache[0])
    return total


@needs_cuda
@pytest.mark.parametrize("kv_fp8", [False, True])
def test_nothing_compiles_in_a_step_after_prebuild(kv_fp8: bool) -> None:
    """After prebuild, decode launches with any split count and any block table width (16 and
    32 columns included: Triton specializes integers divisible by 16) build no new variant."""
    case = Case(8, 2, 128, torch.bfloat16, (500,), kv_fp8=kv_fp8)
    inputs = build_inputs(case, torch.device("cuda"))
    scales = {name: inputs[name] for name in ("k_scale", "v_scale") if name in inputs}
    prebuild(8, inputs["k_cache"], inputs["v_cache"], torch.bfloat16, **scales)
    torch.cuda.synchronize()
    before = _compiled_variants()
    table = inputs["block_tables"]
    for width in (15, 16, 17, 32, 33, 48):  # a narrower table clamps the context: fine here
        columns = min(width, table.shape[1])
        tables = torch.zeros(1, width, dtype=torch.int32, device="cuda")
        tables[:, :columns] = table[:, :columns]
        for num_splits in (1, 2, 7, 40, MAX_SPLITS):
            paged_decode_attention(
                inputs["q"], inputs["k_cache"], inputs["v_cache"], tables,
                inputs["context_lens"], num_splits=num_splits, **scales,
            )  # fmt: skip
    torch.cuda.synchronize()
    assert _compiled_variants() == before


def test_default_kernel_config_tiles_about_8_kib() -> None:
    assert default_kernel_config(128, torch.bfloat16) == KernelConfig(32, num_stages=4)
    assert default_kernel_config(64, torch.bfloat16).tile_tokens == 64
    assert default_kernel_config(128, torch.float32).tile_tokens == 16
    assert default_kernel_config(80, torch.float16).tile_tokens == 32  # D padded to 128
    with pytest.raises(EngineError, match="power of two"):
        KernelConfig(tile_tokens=48)
    with pytest.raises(EngineError, match="maxnreg"):
        KernelConfig(tile_tokens=32, maxnreg=256)


@needs_cuda
def test_a_register_cap_holds_and_keeps_the_result() -> None:
    """A config's maxnreg reaches ptxas (the built kernel uses at most that many registers a
    thread) and the capped kernel still matches the reference on an FP8 cache."""
    from engine.attention import paged_decode_kernels as kernels

    case = Case(8, 2, 128, torch.bfloat16, (700, 33), kv_fp8=True)
    inputs = build_inputs(case, torch.device("cuda"))
    scales = {"k_scale": inputs.pop("k_scale"), "v_scale": inputs.pop("v_scale")}
    config = KernelConfig(128, num_stages=3, maxnreg=128)
    got = paged_decode_attention(**inputs, config=config, num_splits=3, **scales)
    expected = paged_decode_reference(**inputs, **scales)
    torch.cuda.synchronize()
    assert torch.allclose(got.float(), expected.float(), atol=2e-2, rtol=2e-2)
    built = [
        kernel
        for cache in kernels._paged_decode_split_kernel.device_caches.values()
        for kernel in cache[0].values()
        if kernel.metadata.num_stages == 3 and getattr(kernel.metadata, "maxnreg", None) == 128
    ]
    assert built and all(kernel.n_regs <= 128 for kernel in built)


def test_v_pairs_only_where_v_reads_as_16_bit_words() -> None:
    """An FP8 cache's V is read as pairs only where every pair is a whole aligned 16-bit word
    (an even head dim, even strides, an even address); elsewhere the kernel reads bytes."""
    from engine.attention.paged_decode import _pairs_aligned

    fp8 = torch.float8_e4m3fn
    assert _pairs_aligned(torch.zeros(4, 16, 2, 64, dtype=fp8))
    assert not _pairs_aligned(torch.zeros(4, 16, 2, 63, dtype=fp8))  # an odd head dim
    odd_address = torch.zeros(4 * 16 * 2 * 64 + 1, dtype=fp8)[1:].view(4, 16, 2, 64)
    assert not _pairs_aligned(odd_address)
    assert not _pairs_aligned(torch.zeros(4, 16, 2, 65, dtype=fp8)[..., :64])  # odd strides


def test_fp8_cache_tiles_by_the_model_dtype() -> None:
    """An FP8 cache read by a 16-bit model gets its own tiles (128 tokens, three stages) and
    reads V as pairs (FP8_V_PAIRS); an fp32 model keeps its own (its widened tiles would not fit
    an sm_89 block)."""
    fp8 = torch.float8_e4m3fn
    fp8_tiles = KernelConfig(128, num_stages=3, v_pairs=FP8_V_PAIRS)
    assert default_kernel_config(128, torch.bfloat16, fp8) == fp8_tiles
    assert default_kernel_config(128, torch.float16, fp8) == fp8_tiles
    assert default_kernel_config(128, torch.float32, fp8) == default_kernel_config(
        128, torch.float32
    )
    assert default_kernel_config(128, torch.bfloat16, torch.bfloat16) == KernelConfig(32)


def test_inputs_are_checked_with_a_sentence() -> None:
    good = build_inputs(Case(4, 2, 64, torch.float32, (30,)), torch.device("cpu"))
    bad_cases = [
        ({"k_cache": good["k_cache"].half()}, "share a dtype"),
        ({"q": torch.zeros(1, 3, 64)}, "multiple of the cache's 2 KV heads"),
        ({"block_tables": good["block_tables"].long()}, "int32"),
        ({"context_lens": torch.zeros(2, dtype=torch.int32)}, "int32"),
        ({"q": torch.zeros(1, 4, 128, 2)[..., 0][:, :, :64]}, "contiguous last dimension"),
    ]
    for change, message in bad_cases:
        with pytest.raises(EngineError, match=message):
            paged_decode_reference(**{**good, **change})


def test_not_available_on_the_cpu() -> None:
    assert not is_paged_decode_available(torch.device("cpu"))
    if not torch.cuda.is_available():  # a CUDA device object alone is not a GPU
        assert not is_paged_decode_available(torch.device("cuda"))


@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
def test_kernel_refuses_cpu_tensors_outside_the_interpreter() -> None:
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter, where CPU tensors are allowed")
    inputs = build_inputs(Case(4, 2, 64, torch.float32, (30,)), torch.device("cpu"))
    with pytest.raises(EngineError, match="CUDA device"):
        paged_decode_attention(**inputs)


# The split kernel's constexprs for a launch that merges in a second kernel (no merge_counters).
MERGE_OFF = {"FUSED_MERGE": False, "GROUP_P2": 1, "MERGE_CHUNK": 1}
HOPPER_BUILDS = [  # (dtype, head_dim, group, block_size, single split, FP8 cache): for sm_90
    ("bf16", 128, 4, 16, False, False),  # Llama-3-8B
    ("bf16", 128, 4, 16, True, False),
    ("bf16", 128, 4, 16, False, True),  # Llama-3-8B, FP8 KV cache
    ("bf16", 64, 3, 16, False, False),  # SmolLM2
    ("fp16", 80, 2, 32, False, False),
    ("fp32", 64, 3, 16, False, False),
]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
@pytest.mark.parametrize(
    ("dtype", "head_dim", "group", "block_size", "single", "kv_fp8"), HOPPER_BUILDS
)
def test_kernels_compile_for_hopper(
    dtype: str, head_dim: int, group: int, block_size: int, single: bool, kv_fp8: bool
) -> None:
    """Ahead of time, no GPU needed (Triton's bundled ptxas): the split kernel with its default
    launch config and the merge kernel build for an H200 (sm_90), the split kernel's K/V
    copies are pipelined (cp.async groups still pending while a tile is computed; with the
    block ids loaded in the tile's own iteration Triton 3.6 waited for every copy), and the
    shared memory leaves room for several programs an SM."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    import triton

    from engine.attention import paged_decode_kernels as kernels

    def build(fn, constexprs: dict, options: dict):
        return _build(fn, constexprs, options, dtype=dtype, kv_fp8=kv_fp8, arch=90)

    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    config = default_kernel_config(
        head_dim, torch_dtype, torch.float8_e4m3fn if kv_fp8 else torch_dtype
    )
    block_d = triton.next_power_of_2(head_dim)
    split = build(
        kernels._paged_decode_split_kernel,
        {
            "GROUP": group,
            "GROUP_PAD": max(16, triton.next_power_of_2(group)),
            "HEAD_DIM": head_dim,
            "BLOCK_D": block_d,
            "BLOCK_SIZE": block_size,
            "TILE_N": config.tile_tokens,
            "SINGLE_SPLIT": single,
            "KV_FP8": kv_fp8,
            "FP16_DOTS": kv_fp8 and dtype != "fp32",
            "DOT_PRECISION": "ieee" if dtype == "fp32" else "tf32",
            **MERGE_OFF,
            "USE_PDL": False,
        },
        {"num_warps": config.num_warps, "num_stages": config.num_stages},
    )
    # K/V tiles stay in flight across iterations: the loop waits with copy groups pending.
    waits = {int(n) for n in re.findall(r"cp\.async\.wait_group\s+(\d+)", split.asm["ptx"])}
    assert max(waits, default=0) > 0, waits
    # Four programs an SM (228 KiB); three with an FP8 cache's larger tiles.
    assert split.metadata.shared <= (76 if kv_fp8 else 64) * 1024
    merge = build(
        kernels._merge_splits_kernel,
        {"HEAD_DIM": head_dim, "BLOCK_D": block_d, "SPLITS_PAD": 128, "USE_PDL": False},
        {"num_warps": 8},
    )
    assert merge.metadata.shared <= 16 * 1024


@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
@pytest.mark.parametrize("kv_fp8", [False, True])
def test_fused_merge_counts_once_a_program_and_reads_past_l1(kv_fp8: bool) -> None:
    """The split kernel that merges its own splits (FUSED_MERGE), built for sm_90: one thread of
    a program counts it in (one predicated atomic add, acquire-release at GPU scope) after a
    barrier (every thread's partials stored), the count reaches the other threads through
    another barrier, and the merge loads the partials from L2 (.cg), never a stale L1 line;
    the merge costs the kernel no shared memory (the programs an SM stay as many)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.attention import paged_decode_kernels as kernels

    dtype = torch.bfloat16
    config = default_kernel_config(128, dtype, torch.float8_e4m3fn if kv_fp8 else dtype)
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    built = {}
    for fused in (False, True):
        constexprs = {
            "GROUP": 4, "GROUP_PAD": 16, "HEAD_DIM": 128, "BLOCK_D": 128, "BLOCK_SIZE": 16,
            "TILE_N": config.tile_tokens, "SINGLE_SPLIT": False, "KV_FP8": kv_fp8,
            "FP16_DOTS": kv_fp8, "DOT_PRECISION": "tf32", "FUSED_MERGE": fused,
            "GROUP_P2": 4 if fused else 1, "MERGE_CHUNK": 8 if fused else 1, "USE_PDL": True,
        }  # fmt: skip
        fn = kernels._paged_decode_split_kernel
        built[fused] = _build(fn, constexprs, options, dtype="bf16", kv_fp8=kv_fp8, arch=90)
    lines = built[True].asm["ptx"].splitlines()
    atomics = [i for i, line in enumerate(lines) if "atom." in line]
    assert len(atomics) == 1, [lines[i] for i in atomics]
    atomic = lines[atomics[0]].strip()
    assert atomic.startswith("@%p") and ".gpu" in atomic and ".acq_rel" in atomic, atomic
    last_store = max(i for i in range(atomics[0]) if "st.global" in lines[i])
    assert any("bar.sync" in line for line in lines[last_store : atomics[0]])
    first_merge_load = next(i for i in range(atomics[0], len(lines)) if "ld.global" in lines[i])
    assert any("bar.sync" in line for line in lines[atomics[0] : first_merge_load])
    merge_loads = [line for line in lines[atomics[0] :] if "ld.global" in line]
    assert merge_loads and all(".cg" in line for line in merge_loads), merge_loads
    assert "atom." not in built[False].asm["ptx"]
    assert built[True].metadata.shared == built[False].metadata.shared


@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
@pytest.mark.parametrize("kv_fp8", [False, True])
def test_programmatic_launch_waits_before_any_load(kv_fp8: bool) -> None:
    """With USE_PDL (programmatic dependent launch) the split and merge kernels built for sm_90
    wait for the kernels before them (griddepcontrol.wait) before any global load: q, the block
    table and this step's K/V slot are their outputs. The merge, a few programs, lets the next
    kernel launch at once; the split kernel after its loop."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.attention import paged_decode_kernels as kernels

    dtype = torch.bfloat16
    config = default_kernel_config(128, dtype, torch.float8_e4m3fn if kv_fp8 else dtype)
    split_constexprs = {
        "GROUP": 4, "GROUP_PAD": 16, "HEAD_DIM": 128, "BLOCK_D": 128, "BLOCK_SIZE": 16,
        "TILE_N": config.tile_tokens, "SINGLE_SPLIT": False, "KV_FP8": kv_fp8,
        "FP16_DOTS": kv_fp8, "DOT_PRECISION": "tf32", **MERGE_OFF, "USE_PDL": True,
    }  # fmt: skip
    merge_constexprs = {"HEAD_DIM": 128, "BLOCK_D": 128, "SPLITS_PAD": 32, "USE_PDL": True}
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    for fn, constexprs in (
        (kernels._paged_decode_split_kernel, split_constexprs),
        (kernels._merge_splits_kernel, merge_constexprs),
    ):
        ptx = _build(fn, constexprs, options, dtype="bf16", kv_fp8=kv_fp8, arch=90).asm["ptx"]
        lines = ptx.splitlines()

        def first(word: str, lines: list[str] = lines) -> int:
            return next(i for i, line in enumerate(lines) if word in line)

        loads = min(first("ld.global"), first("cp.async") if "cp.async" in ptx else len(lines))
        assert first("griddepcontrol.wait") < loads
        assert "griddepcontrol.launch_dependents" in ptx


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
def test_fp8_cache_v_pairs_build_without_byte_loads_for_hopper() -> None:
    """Ahead of time for sm_90: with V read as 16-bit pairs (KernelConfig.v_pairs), the FP8
    cache's split kernel at its default tiles loads V for the P @ V dot with ldmatrix.trans,
    with no one-byte shared-memory load left (the byte-wise build has them), widens each half
    with cvt.rn.f16x2.e4m3x2 after a byte permute, and needs fewer registers a thread: 168 or
    fewer, so that three programs fit an SM (65,536 registers, 128 threads a program), where
    the byte-wise build's fit two."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.attention import paged_decode_kernels as kernels

    config = default_kernel_config(128, torch.bfloat16, torch.float8_e4m3fn)
    built = {}
    for pairs in (False, True):
        constexprs = {
            "GROUP": 4, "GROUP_PAD": 16, "HEAD_DIM": 128, "BLOCK_D": 128, "BLOCK_SIZE": 16,
            "TILE_N": config.tile_tokens, "SINGLE_SPLIT": False, "KV_FP8": True,
            "FP16_DOTS": True, "DOT_PRECISION": "tf32", **MERGE_OFF, "USE_PDL": False,
            "V_PAIRS": pairs, "PAIRS_ASM": pairs,
        }  # fmt: skip
        options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
        fn = kernels._paged_decode_split_kernel
        built[pairs] = _build(fn, constexprs, options, dtype="bf16", kv_fp8=True, arch=90)
    byte_loads = re.compile(r"ld\.shared\.(u8|b8|s8)")
    assert byte_loads.search(built[False].asm["ptx"])
    ptx = built[True].asm["ptx"]
    assert not byte_loads.search(ptx)
    assert re.search(r"ldmatrix\.sync\.aligned\.\S*trans", ptx)
    assert "cvt.rn.f16x2.e4m3x2" in ptx and "prmt.b32" in ptx
    registers = {pairs: _registers(kernel) for pairs, kernel in built.items()}
    assert registers[True] <= 168 < registers[False], registers


def _registers(kernel) -> int:
    """Registers a thread of a kernel built ahead of time (cuobjdump, bundled with Triton)."""
    import tempfile

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        usage = subprocess.run(
            [str(tool), "-res-usage", cubin.name], capture_output=True, text=True, check=True
        ).stdout
    return int(re.search(r"REG:(\d+)", usage).group(1))


def _build(fn, constexprs: dict, options: dict, *, dtype: str, kv_fp8: bool, arch: int):
    """The kernel built ahead of time for sm_<arch> (Triton's bundled ptxas), its pointers and
    strides specialized as the launcher does."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if "V_PAIRS" in fn.arg_names:  # the split kernel: an FP8 cache's V as the launcher reads it
        pairs = kv_fp8 and constexprs.get("FP16_DOTS", False) and FP8_V_PAIRS
        constexprs = {"V_PAIRS": pairs, "PAIRS_ASM": pairs} | constexprs
    signature = {}
    for name in fn.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name.startswith("part_") or name in ("k_scale_ptr", "v_scale_ptr"):
            signature[name] = "*fp32"
        elif name in ("k_ptr", "v_ptr") and kv_fp8:
            signature[name] = "*fp8e4nv"
        elif name.endswith("_ptr"):
            signature[name] = (
                "*i32"
                if name in ("block_tables_ptr", "context_lens_ptr", "counters_ptr")
                else f"*{dtype}"
            )
        else:
            signature[name] = "fp32" if name == "scale_log2" else "i32"
    aligned = [  # what the launcher specializes (not the arguments that change step by step)
        i
        for i, n in enumerate(fn.arg_names)
        if (n.endswith("_ptr") or "stride" in n) and n not in fn.do_not_specialize
    ]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TRITON, reason=NO_TRITON)
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_fp8_cache_kernel_fits_an_ada_block(dtype: str, head_dim: int) -> None:
    """An FP8 cache's default launch builds for sm_89 (Ada: L40S, RTX 4090, the first cards with
    FP8) within a block's 99 KiB of shared memory, whatever the model's dtype (an fp32 model's
    widened tiles at the FP8 tile size took 202 KiB)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.attention import paged_decode_kernels as kernels

    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    config = default_kernel_config(head_dim, torch_dtype, torch.float8_e4m3fn)
    constexprs = {
        "GROUP": 4,
        "GROUP_PAD": 16,
        "HEAD_DIM": head_dim,
        "BLOCK_D": head_dim,
        "BLOCK_SIZE": 16,
        "TILE_N": config.tile_tokens,
        "SINGLE_SPLIT": False,
        "KV_FP8": True,
        "FP16_DOTS": dtype != "fp32",
        "DOT_PRECISION": "ieee" if dtype == "fp32" else "tf32",
        **MERGE_OFF,
        "USE_PDL": False,
    }
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    built = _build(
        kernels._paged_decode_split_kernel, constexprs, options, dtype=dtype, kv_fp8=True, arch=89
    )
    assert built.metadata.shared <= 101_376, (config, built.metadata.shared)


def test_paged_decode_merges_in_its_kernel_only_where_its_counters_reach() -> None:
    """PagedDecode hands the kernel its merge counters (allocated by prebuild) for a batch of at
    most as many sequences as they count, and none before prebuild or for a larger batch: the
    second merge kernel then runs, as before."""
    from engine.attention.decode import DecodeBatch, PagedDecode
    from engine.attention.paged_decode import merge_counters

    calls: list[dict] = []
    decode = PagedDecode(lambda q, *args, **kwargs: calls.append(kwargs) or q)
    pages = torch.zeros(4, 16, 2, 8)  # [blocks, block size, KV heads, D]

    def step(rows: int) -> None:
        batch = DecodeBatch.build([5] * rows, [[1]] * rows, 16, torch.device("cpu"))
        q, kv = torch.zeros(rows, 4, 8), torch.zeros(rows, 2, 8)
        decode.forward(q, kv, kv, pages, pages.clone(), batch)

    step(2)
    decode.merge_counters = merge_counters(2, 2, torch.device("cpu"))
    step(2)
    step(3)
    assert ["merge_counters" in kwargs for kwargs in calls] == [False, True, False]
    assert calls[1]["merge_counters"] is decode.merge_counters
