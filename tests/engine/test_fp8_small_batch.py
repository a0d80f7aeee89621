"""The FP8-weight Triton kernel for decode-sized products (engine/models/fp8_small_batch.py):
under Triton's interpreter here, on the device where there is one, and Fp8Linear's choice of it
(up to LINEAR_ROWS rows on CUDA) over torch._scaled_mm."""

import importlib.util
import os
import re

import pytest
import torch

from tests.engine.run_fp8_small_batch_interpreted import SHAPES, TILE_CASES, check
from tests.engine.test_fp8_kv import _run_interpreted

HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_cuda = pytest.mark.skipif(
    not (HAS_TRITON and torch.cuda.is_available()), reason="needs a CUDA device and triton"
)


def _assert_matches(result: dict) -> None:
    rows, outputs, _ = result["shape"]
    assert result["out_shape"] == [rows, outputs]
    assert result["dtype"] == "torch.bfloat16"
    assert result["within"], result


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (the dev extra)")
def test_kernel_matches_fp32_product_interpreted() -> None:
    results = _run_interpreted("tests.engine.run_fp8_small_batch_interpreted")
    assert len(results) == len(SHAPES) + len(TILE_CASES)
    for result in results:
        _assert_matches(result)
    # From 2 rows the engine's products take FP8 activations.
    assert {r["kind"] for r in results[: len(SHAPES)]} == {"gemv", "w8a8"}


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (the dev extra)")
def test_one_row_fusion_gives_the_layers_own_result_interpreted() -> None:
    """A decoder layer with FP8 projections, one row (a single stream's decode step): through
    GEMVs that also do the norms, SiLU * up and residual adds (its four products as four fused
    calls), it gives what the layer gives through the plain GEMV and its own torch work. Both
    round where the model rounds; only an input the kernel's exp or rsqrt puts on the other side
    of a rounding may differ, by an ulp (2**-8) carried through a few bf16 steps: 2**-6 of the
    largest output. Two rows never take the fused path. The same with bf16 projections
    (Linear.one_row, the same kernel unscaled) against F.linear: its products sum in another
    order, in fp32, and round once to bf16 as the GEMV's do."""
    results = _run_interpreted("tests.engine.run_one_row_fusion_interpreted")
    for weights in ("fp8", "bf16"):
        _assert_one_row_fusion_holds(results[weights])


@needs_cuda
@pytest.mark.parametrize("weights", ["fp8", "bf16"])
def test_one_row_fusion_gives_the_layers_own_result_cuda(weights: str) -> None:
    """The same on the GPU (its exp and rsqrt are the hardware's approximations)."""
    from tests.engine.run_one_row_fusion_interpreted import compare

    _assert_one_row_fusion_holds(compare(torch.device("cuda"), weights))


def _assert_one_row_fusion_holds(result: dict) -> None:
    assert result["fused_calls"] == 4 and result["calls_after"] == 0, result
    assert result["finite"] and result["pair_equal"], result
    assert result["max_abs_diff"] <= 2**-6 * result["max_abs"], result


@needs_cuda
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matches_fp32_product_cuda(shape: tuple[int, int, int]) -> None:
    _assert_matches(check(*shape, torch.device("cuda")))


@needs_cuda
@pytest.mark.parametrize(("shape", "tiles"), TILE_CASES)
def test_explicit_tiles_match_fp32_product_cuda(shape: tuple[int, int, int], tiles: dict) -> None:
    _assert_matches(check(*shape, torch.device("cuda"), tiles))


@needs_cuda
def test_linear_takes_the_kernel_for_few_rows_only() -> None:
    from engine.models import fp8_small_batch
    from engine.models.fp8 import Fp8Linear, quantize_rows

    device = torch.device("cuda")
    linear = Fp8Linear(256, 128).to(device)
    weight, scale = quantize_rows(torch.randn(128, 256, device=device))
    linear.weight.data, linear.weight_scale.data = weight, scale
    linear.use_scaled_mm(device)
    assert linear.small_batch_rows == 0  # off unless asked for
    linear.use_scaled_mm(device, small_batch_kernel=True)
    assert linear.scaled_mm and linear.small_batch_rows == fp8_small_batch.LINEAR_ROWS
    calls = []
    original = fp8_small_batch.fp8_weight_matmul
    fp8_small_batch.fp8_weight_matmul = lambda *a: calls.append(a[0].shape[0]) or original(*a)
    try:
        few = torch.randn(2, 3, 256, device=device, dtype=torch.bfloat16)
        many = torch.randn(
            fp8_small_batch.LINEAR_ROWS + 1, 256, device=device, dtype=torch.bfloat16
        )
        out_few, out_many = linear(few), linear(many)
    finally:
        fp8_small_batch.fp8_weight_matmul = original
    assert calls == [6]
    assert out_few.shape == (2, 3, 128) and out_many.shape == (fp8_small_batch.LINEAR_ROWS + 1, 128)
    weight_f32 = weight.float() * scale
    for x, out in ((few.reshape(-1, 256), out_few.reshape(-1, 128)), (many, out_many)):
        reference = x.float() @ weight_f32.T
        # _scaled_mm also quantizes the activations (E4M3: 2**-4 relative): a looser bound.
        assert ((out.float() - reference).norm() / reference.norm()) < 2**-4


def _loads_before_wait(lines: list[str]) -> int:
    """Global loads in a PTX listing before its first griddepcontrol.wait."""
    wait = next(i for i, line in enumerate(lines) if "griddepcontrol.wait" in line)
    return sum("ld.global" in line for line in lines[:wait])


# The one-row GEMV's constexprs for a product alone (none of the layer's work fused in).
GEMV_UNFUSED = {"NORM": False, "GATED": False, "ADD_RESIDUAL": False, "SCALED": True}


def _build_for_hopper(fn, kinds: dict, constexprs: dict, config: dict):
    """fn compiled for an H200 (sm_90) by Triton's bundled ptxas, as the launcher specializes it:
    pointers, strides, and N and K (multiples of 16 wherever Fp8Linear takes the kernels, as for
    _scaled_mm) divisible by 16."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kinds = {"norm_ptr": "*bf16", "res_ptr": "*bf16", "eps": "fp32"} | kinds
    signature = {
        name: "constexpr" if name in constexprs else kinds.get(name, "i32") for name in fn.arg_names
    }
    aligned = [
        i
        for i, n in enumerate(fn.arg_names)
        if n.endswith("_ptr") or n.startswith("stride") or n in ("N", "K")
    ]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    return triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": config["num_warps"], "num_stages": config["num_stages"]},
    )


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (the dev extra)")
@pytest.mark.parametrize("w8a8", [True, False])
@pytest.mark.parametrize("rows", [1, 2, 16, 17, 32, 33, 64])
def test_kernel_compiles_for_hopper(rows: int, w8a8: bool) -> None:
    """Ahead of time, no GPU needed: the kernel that plan() picks for `rows` builds for an H200
    (sm_90) with its tile sizes, and its shared memory leaves room for a second program an SM;
    the tensor-core kernels' tiles are pipelined (copy groups still pending while a tile is
    multiplied), and with FP8 activations the product runs on Hopper's FP8 tensor cores (wgmma
    on E4M3 operands: no weight widened). The GEMV loads straight into registers."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")

    from engine.models import fp8_gemv, fp8_w8a8
    from engine.models import fp8_small_batch as kernels

    kind, config = kernels.plan(rows, w8a8)
    assert kind == ("gemv" if rows == 1 else "w8a8" if w8a8 else "dot")
    split_k = config.get("split_k", 4 if kind == "w8a8" else 1)  # w8a8: its widest split
    out = "*bf16" if split_k == 1 else "*fp32"  # split-K adds fp32 partials
    kinds = {"w_ptr": "*fp8e4nv", "scale_ptr": "*fp32", "x_ptr": "*bf16", "out_ptr": out}
    constexprs = {"BLOCK_N": config["block_n"], "SPLIT_K": split_k}
    if kind == "gemv":
        fn = fp8_gemv._fp8_weight_gemv_kernel
        constexprs |= {
            "BLOCK_M": 1,
            "BLOCK_K": config["block_k"],
            "REDUCE_EACH_TILE": config.get("reduce_each_tile", False),
            "PREFETCH": config.get("prefetch", False),
            **GEMV_UNFUSED,
            "USE_PDL": False,
        }
    elif kind == "dot":
        fn = kernels._fp8_weight_matmul_kernel
        constexprs |= {"BLOCK_M": kernels._block_m(kind, rows), "BLOCK_K": config["block_k"]}
    else:
        fn = fp8_w8a8._fp8_w8a8_kernel
        kinds |= {"xq_ptr": "*fp8e4nv", "xs_ptr": "*fp32", "ws_ptr": "*fp32"}
        constexprs |= {
            "BLOCK_M": fp8_w8a8.block_m(rows),
            "GROUP": fp8_w8a8.GROUP,
            "SWAP": config.get("swap", True),
            "USE_PDL": False,
        }
    built = _build_for_hopper(fn, kinds, constexprs, config)
    ptx = built.asm["ptx"]
    if kind != "gemv":
        waits = {int(n) for n in re.findall(r"cp\.async\.wait_group\s+(\d+)", ptx)}
        assert max(waits, default=0) > 0, waits
    if kind == "w8a8":
        assert re.search(r"wgmma\.mma_async\S*\.e4m3\.e4m3", ptx)
    assert built.metadata.shared <= 228 * 1024 // 2, built.metadata.shared


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (the dev extra)")
@pytest.mark.parametrize(
    ("prefetch", "fused"),
    [
        (False, {}),
        (True, {}),
        (False, {"NORM": True}),
        (True, {"GATED": True, "ADD_RESIDUAL": True}),
        (False, {"SCALED": False, "NORM": True}),  # bf16 weights (Linear.one_row)
        (False, {"SCALED": False, "GATED": True, "ADD_RESIDUAL": True}),
    ],
)
def test_gemv_with_programmatic_launch_builds_for_hopper(prefetch: bool, fused: dict) -> None:
    """Launched with programmatic dependent launch (USE_PDL), the one-row GEMV built for sm_90
    loads weights before it waits for the kernel before it (griddepcontrol.wait: the weights are
    no kernel's output), and lets the next kernel launch (griddepcontrol.launch_dependents)
    only after its loop, before its stores; so too with each tile loaded an iteration ahead,
    with the layer's norm, or SiLU * up and the residual, fused in, and with bf16 weights at
    their own tiles (no scale)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.models import fp8_gemv

    bf16 = not fused.get("SCALED", True)
    config = fp8_gemv.BF16_GEMV_CONFIG if bf16 else fp8_gemv.GEMV_CONFIG
    weight = "*bf16" if bf16 else "*fp8e4nv"
    kinds = {"w_ptr": weight, "scale_ptr": "*fp32", "x_ptr": "*bf16", "out_ptr": "*bf16"}
    constexprs = {
        "BLOCK_M": 1,
        "BLOCK_N": config["block_n"],
        "BLOCK_K": config["block_k"],
        "SPLIT_K": 1,
        "REDUCE_EACH_TILE": config.get("reduce_each_tile", False),
        "PREFETCH": prefetch,
        **GEMV_UNFUSED,
        **fused,
        "USE_PDL": True,
    }
    lines = (
        _build_for_hopper(fp8_gemv._fp8_weight_gemv_kernel, kinds, constexprs, config)
        .asm["ptx"]
        .splitlines()
    )
    if fused:  # x, the norm's weight and the residual are loaded after the wait, not before
        plain = {**constexprs, **GEMV_UNFUSED, "SCALED": not bf16}
        plain_lines = (
            _build_for_hopper(fp8_gemv._fp8_weight_gemv_kernel, kinds, plain, config)
            .asm["ptx"]
            .splitlines()
        )
        assert _loads_before_wait(lines) == _loads_before_wait(plain_lines)
    first = {
        word: next(i for i, line in enumerate(lines) if word in line)
        for word in ("ld.global", "griddepcontrol.wait", "griddepcontrol.launch_dependents")
    }
    last_store = max(i for i, line in enumerate(lines) if "st.global" in line)
    assert (
        first["ld.global"]
        < first["griddepcontrol.wait"]
        < first["griddepcontrol.launch_dependents"]
        < last_store
    ), first
    without = dict(constexprs, USE_PDL=False)
    ptx = _build_for_hopper(fp8_gemv._fp8_weight_gemv_kernel, kinds, without, config).asm["ptx"]
    assert "griddepcontrol" not in ptx


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (the dev extra)")
def test_activation_quantizer_compiles_for_hopper() -> None:
    """The activations' quantizing kernel rounds with the hardware's saturating E4M3 conversion."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.models import fp8_w8a8

    kinds = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32"}
    constexprs = {
        "GROUP": fp8_w8a8.GROUP,
        "GROUPS": fp8_w8a8.GROUPS_PER_PROGRAM,
        "USE_PDL": False,
    }
    built = _build_for_hopper(
        fp8_w8a8._quantize_groups_kernel, kinds, constexprs, {"num_warps": 4, "num_stages": 1}
    )
    assert "cvt.rn.satfinite.e4m3x2.f32" in built.asm["ptx"]


@needs_cuda
def test_compiled_linear_calls_the_kernel_as_eager_does() -> None:
    """Under torch.compile (the engine's --compile halves) the kernel is one opaque operator:
    few rows and many give eager's results, the few through the kernel (split-K from 17 rows)."""
    from engine.models.fp8 import Fp8Linear, quantize_rows

    device = torch.device("cuda")
    linear = Fp8Linear(512, 256).to(device)
    weight, scale = quantize_rows(torch.randn(256, 512, device=device))
    linear.weight.data, linear.weight_scale.data = weight, scale
    linear.use_scaled_mm(device, small_batch_kernel=True)
    compiled = torch.compile(linear, dynamic=True)
    for rows in (1, 3, 32, 64, 70):
        x = torch.randn(rows, 512, device=device, dtype=torch.bfloat16)
        assert torch.equal(compiled(x), linear(x)), rows


@needs_cuda
@pytest.mark.parametrize("rows", [32, 64])
def test_split_k_products_are_the_same_every_time(rows: int) -> None:
    """Split-K's partials are summed in a fixed order: the same product, bit for bit, call after
    call and replayed in a CUDA graph (atomics summed them in whatever order the programs
    finished: a greedy decode could change from run to run)."""
    from engine.device_guard import sm_count
    from engine.models import fp8_small_batch as kernels
    from engine.models.fp8 import quantize_rows

    device = torch.device("cuda")
    config = kernels.plan(rows)[1]
    assert kernels.w8a8_split(4096, config["block_n"], sm_count(device)) > 1
    weight, scale = quantize_rows(torch.randn(4096, 4096, device=device))
    x = torch.randn(rows, 4096, device=device, dtype=torch.bfloat16)
    first = kernels.fp8_weight_matmul(x, weight, scale)
    for _ in range(20):
        assert torch.equal(kernels.fp8_weight_matmul(x, weight, scale), first)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed = kernels.fp8_weight_matmul(x, weight, scale)
    for _ in range(5):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(replayed, first)


@pytest.mark.skipif(
    not (HAS_TRITON and torch.cuda.device_count() >= 2), reason="needs two CUDA devices"
)
def test_linear_on_a_second_gpu_runs_there() -> None:
    """Fp8Linear on cuda:1 while cuda:0 is current: Triton launches on the current device, so
    the kernels make the tensors' device current for their launch."""
    from engine.models.fp8 import Fp8Linear, quantize_rows

    device = torch.device("cuda", 1)
    linear = Fp8Linear(512, 256).to(device)
    weight, scale = quantize_rows(torch.randn(256, 512, device=device))
    linear.weight.data, linear.weight_scale.data = weight, scale
    linear.use_scaled_mm(device, small_batch_kernel=True)
    x = torch.randn(1, 512, device=device, dtype=torch.bfloat16)
    reference = x.float() @ (weight.float() * scale).T
    torch.cuda.set_device(0)
    out = linear(x)
    torch.cuda.synchronize(device)
    assert torch.allclose(out.float(), reference, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (the dev extra)")
def test_prebuild_takes_one_row_count_a_variant() -> None:
    """One product a kernel variant: the GEMV (1 row), then the tensor-core kernel at 16, 32 and
    64 rows of BLOCK_M (each with its own tiles)."""
    from engine.models import fp8_small_batch as kernels

    assert kernels.prebuild_rows(64) == [1, 2, 17, 33]
    assert kernels.prebuild_rows(16) == [1, 2]


@needs_cuda
def test_nothing_compiles_in_a_step_after_prebuild() -> None:
    """After prebuild, products of every row count up to LINEAR_ROWS, on the 8B's projection
    shapes, build no new kernel variant (Triton would compile it inside a decode step)."""
    from engine.models import fp8_gemv, fp8_w8a8
    from engine.models import fp8_small_batch as kernels
    from engine.models.fp8 import quantize_rows

    def variants() -> int:
        fns = (
            fp8_gemv._fp8_weight_gemv_kernel,
            kernels._fp8_weight_matmul_kernel,
            fp8_w8a8._fp8_w8a8_kernel,
            fp8_w8a8._quantize_groups_kernel,
            fp8_w8a8._sum_splits_kernel,
        )
        return sum(len(cache[0]) for fn in fns for cache in fn.device_caches.values())

    device = torch.device("cuda")
    kernels.prebuild(device, outputs=(6144, 4096))
    torch.cuda.synchronize()
    before = variants()
    for outputs, inputs in ((6144, 4096), (4096, 14336)):
        weight, scale = quantize_rows(torch.randn(outputs, inputs, device=device))
        for rows in range(1, kernels.LINEAR_ROWS + 1):
            x = torch.randn(rows, inputs, device=device, dtype=torch.bfloat16)
            kernels.fp8_weight_matmul(x, weight, scale)
    torch.cuda.synchronize()
    assert variants() == before


@needs_cuda
@pytest.mark.parametrize("w8a8", [True, False])
def test_a_nan_activation_stays_nan(w8a8: bool) -> None:
    """A NaN in a row's activations makes that row's outputs NaN, with FP8 activations as with
    bf16 ones: the GPU's max drops NaN, and the quantizer once turned it into -448 times its
    group's scale, a plausible wrong number."""
    from engine.models import fp8_small_batch as kernels
    from engine.models.fp8 import quantize_rows

    device = torch.device("cuda")
    weight, scale = quantize_rows(torch.randn(512, 4096, device=device))
    x = torch.randn(4, 4096, device=device, dtype=torch.bfloat16)
    x[0, 1000] = float("nan")
    out = kernels.fp8_weight_matmul(x, weight, scale, w8a8)
    assert out[0].isnan().all()
    assert out[1:].isfinite().all()


@needs_cuda
@pytest.mark.parametrize("compile", [False, True])
def test_programmatic_launch_writes_the_same_tokens_cuda(tmp_path, compile: bool) -> None:
    """An engine with programmatic dependent launch (EngineConfig.pdl: the FP8 products, the K/V
    writes and the paged decode attention start while the kernel before them ends, in CUDA
    graphs; with compile, torch.compile's kernels too) writes the tokens of one without, one
    request at a time and three together, token for token over a chaotic random model (std
    0.2: any rounding changes its greedy output within twenty tokens), so no kernel read what
    it needs before its producer finished: the kernels compute the same sums in the same
    order."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs a Hopper or newer GPU")
    from engine import SamplingParams
    from engine.device_guard import is_programmatic_launch_on, set_programmatic_launch
    from tests.engine.conftest import save_tiny_model, tiny_engine
    from tests.engine.test_fp8_kv import _prompt

    save_tiny_model(tmp_path, "llama")
    options = {"device": "cuda", "dtype": "bfloat16", "weights": "fp8", "kv_dtype": "fp8"}
    options["compile"] = compile
    params = SamplingParams(max_new_tokens=48)
    prompts = [_prompt(length, seed) for seed, length in enumerate((5, 90, 300))]
    # Process-wide: an engine built earlier in this process (pdl on by default) turned it on.
    set_programmatic_launch(torch.device("cuda"), False)
    plain = tiny_engine(tmp_path, pdl=False, **options)
    assert not is_programmatic_launch_on()

    def tokens(engine) -> list[list[int]]:  # one at a time (the GEMV), then together (w8a8)
        alone = [engine.generate(prompt, params).token_ids for prompt in prompts]
        return alone + [r.token_ids for r in engine.generate_many(prompts, params)]

    expected = tokens(plain)
    try:
        engine = tiny_engine(tmp_path, pdl=True, **options)
        assert is_programmatic_launch_on()
        assert engine._main.runner.graphs is not None  # decode steps replay CUDA graphs
        got = tokens(engine)
        from engine.attention import paged_decode_kernels
        from engine.models import fp8_w8a8

        for fn in (
            fp8_gemv_module()._fp8_weight_gemv_kernel,
            fp8_w8a8._fp8_w8a8_kernel,
            paged_decode_kernels._paged_decode_split_kernel,
        ):
            assert _launched_with_pdl(fn), fn.fn.__name__
    finally:
        set_programmatic_launch(torch.device("cuda"), False)
    assert got == expected


def fp8_gemv_module():
    from engine.models import fp8_gemv

    return fp8_gemv


def _launched_with_pdl(fn) -> bool:
    """Whether Triton built a variant of `fn` for launching with programmatic dependent launch."""
    return any(
        getattr(kernel.metadata, "launch_pdl", False)
        for cache in fn.device_caches.values()
        for kernel in cache[0].values()
    )


if HAS_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _late_copy_kernel(src_ptr, dst_ptr, n, spins, zero, BLOCK: tl.constexpr):
        """Lets the next kernel launch at once, then spins, then copies src to dst: a producer
        whose output comes late, for a consumer launched with programmatic dependent launch.
        `zero` (0.0, a runtime argument) ties the spin to the store: with literals only, the
        compiler found 1.0 a fixed point of the loop's fp32 step and `delay * 0.0` zero, folded
        both and dropped the loop, so the copy was not late at all (its first run, on an H100;
        test_late_producer_spins_when_built checks that the loop stays)."""
        tl.extra.cuda.gdc_launch_dependents()
        offsets = tl.arange(0, BLOCK)
        ok = offsets < n
        x = tl.load(src_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
        delay = tl.zeros((BLOCK,), dtype=tl.float32) + (1.0 + zero)
        for _ in range(spins):
            delay = delay * 0.9999999 + 1e-7
        # delay stays within (0, 2]: times zero it adds 0, but the store waits for the loop
        tl.store(dst_ptr + offsets, (x + delay * zero).to(dst_ptr.dtype.element_ty), mask=ok)

    @triton.jit
    def _eager_copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
        """A consumer that does not wait (no griddepcontrol.wait): the control."""
        offsets = tl.arange(0, BLOCK)
        ok = offsets < n
        tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=ok, other=0.0), mask=ok)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (the dev extra)")
def test_late_producer_spins_when_built() -> None:
    """Ahead of time for sm_90: the late producer of the test below keeps its spin loop (a
    backward branch and the multiply-adds in it) between letting the next kernel launch and its
    store, so its output does come late."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = _late_copy_kernel
    signature = {"src_ptr": "*bf16", "dst_ptr": "*bf16", "n": "i32", "spins": "i32"}
    signature |= {"zero": "fp32", "BLOCK": "constexpr"}
    source = ASTSource(fn=fn, signature=signature, constexprs={"BLOCK": 512})
    ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    lines = ptx.splitlines()
    launch = next(i for i, line in enumerate(lines) if "griddepcontrol.launch_dependents" in line)
    store = next(i for i, line in enumerate(lines) if "st.global" in line)
    between = "\n".join(lines[launch:store])
    assert re.search(r"\bbra(\.uni)?\s", between), "no loop before the store"
    assert re.search(r"\bfma\.rn\.f32", between), "no multiply-adds before the store"


@needs_cuda
def test_programmatic_launch_waits_for_a_late_producer_cuda() -> None:
    """A producer lets the next kernel launch at once and writes its output a millisecond later:
    the FP8 GEMV and the paged decode attention, launched with programmatic dependent launch
    right after it, still read the new input (they wait before they read), while a control
    kernel that does not wait reads the old one (the window is real on this GPU)."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs a Hopper or newer GPU")
    from engine.attention.paged_decode import paged_decode_attention
    from engine.device_guard import set_programmatic_launch
    from engine.models.fp8 import quantize_rows
    from engine.models.fp8_small_batch import fp8_weight_matmul
    from tests.engine.paged_decode_cases import Case, build_inputs

    device = torch.device("cuda")
    spins = 1 << 20  # about a millisecond of dependent multiply-adds

    def late(src: torch.Tensor, dst: torch.Tensor) -> None:
        n = src.numel()
        _late_copy_kernel[(1,)](src, dst, n, spins, 0.0, BLOCK=triton.next_power_of_2(n))

    weight, scale = quantize_rows(torch.randn(256, 512, device=device))
    fresh = torch.randn(1, 512, device=device, dtype=torch.bfloat16)
    case = Case(8, 2, 128, torch.bfloat16, (300,))
    inputs = build_inputs(case, device)
    attend = {k: inputs[k] for k in ("k_cache", "v_cache", "block_tables", "context_lens")}
    control, stale, q = (
        torch.zeros_like(fresh),
        torch.zeros_like(fresh),
        torch.zeros_like(inputs["q"]),
    )
    try:
        assert set_programmatic_launch(device, True)
        product = fp8_weight_matmul(fresh, weight, scale)
        attention = paged_decode_attention(inputs["q"], **attend)
        seen = torch.zeros_like(fresh)
        # Each kernel built before the timed launches (a build inside would outlast the spin).
        _eager_copy_kernel[(1,)](control, seen, 0, BLOCK=512, launch_pdl=True)
        late(fresh, stale)
        torch.cuda.synchronize()
        stale.zero_()
        late(fresh, control)  # the control reads `control` while the late copy fills it
        _eager_copy_kernel[(1,)](control, seen, 512, BLOCK=512, launch_pdl=True)
        torch.cuda.synchronize()  # (the control never waits: nothing else may follow it)
        late(fresh, stale)
        got_product = fp8_weight_matmul(stale, weight, scale)
        late(inputs["q"], q)
        got_attention = paged_decode_attention(q, **attend)
        torch.cuda.synchronize()
    finally:
        set_programmatic_launch(device, False)
    assert not torch.equal(seen, fresh), "the control read the new input: no window to test"
    assert torch.equal(got_product, product)
    assert torch.equal(got_attention, attention)


def test_programmatic_launch_stays_off_without_a_hopper_gpu(tmp_path) -> None:
    """pdl asked for on the CPU (or a GPU older than Hopper): the engine builds and runs, and
    the kernels launch as before (USE_PDL off, no launch_pdl for Triton)."""
    from engine import SamplingParams
    from engine.device_guard import (
        is_programmatic_launch_on,
        launch_options,
        set_programmatic_launch,
    )
    from tests.engine.conftest import save_tiny_model, tiny_engine

    assert set_programmatic_launch(torch.device("cpu"), True) is False
    save_tiny_model(tmp_path, "llama")
    engine = tiny_engine(tmp_path, pdl=True)
    assert len(engine.generate([1, 2, 3], SamplingParams(max_new_tokens=4)).token_ids) == 4
    assert not is_programmatic_launch_on()
    assert launch_options(torch.device("cpu")) == {"USE_PDL": False}
