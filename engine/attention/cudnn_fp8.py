"""FP8 prefill attention through cuDNN's sdpa_fp8 (CUDA, Hopper or newer, cuDNN's frontend).

The cuDNN split backend (cudnn_split.py) cuts a long chunk's attention into two dense calls, the
cached prefix with no mask and the chunk against itself with a plain causal mask, merged by their
log-sum-exps. FP8 attention plugs in as those calls' kernel (Fp8Attend): each call's Q, K and V
are rounded to E4M3 with one scale per tensor, the softmax's probabilities P to E4M3 (scale 448,
as FP8 attention kernels do), fp32 accumulation, the log-sum-exps in fp32.

What cuDNN 9.19 plans on an H100 (bench/results/cudnn_fp8_variants_h100.json): no mask and a
top-left causal mask, grouped KV heads, padded lengths, the log-sum-exps; not a bottom-right
mask (a chunk after its prefix in one call), and not a bf16 output: on Hopper the FP8 kernel
writes E4M3 only ("sdpa fp8 forward with HALF/BFLOAT16 output is only supported on Blackwell").
So the output is E4M3 against V's scale times O_HEADROOM, which bounds it (an output row is a
combination of V's rows with weights summing to 1, each weight rounded to E4M3, so within 2**-4
of it), widened to the model's dtype after the call. The prefix part, 8K queries folded 4 to a
KV head against 120K keys: 931 TFLOP/s against bf16's 620 on an H100; in the engine one 8K chunk
after 120K keys took 20.3 ms against 28.0 (after 8K keys 3.4 against 3.0: rounding the inputs
costs more than the kernel saves there), and a 128K prompt with FP8 weights and KV 9.74 s against
11.8 (bench/results/fp8_h100.md, calls H-J).

Error: P and the output rounded to E4M3 put the result within 3.3-3.7% (relative L2) of fp32
attention over the same E4M3 inputs, and the log-sum-exps within 5e-4 (same file).
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from engine.device_guard import on_device, triton_module
from engine.models.fp8 import FP8_DTYPE, FP8_MAX, MIN_SCALE, to_fp8

# The softmax's probabilities in [0, 1] scaled by 448 into E4M3 (and back by 1/448).
P_SCALE = FP8_MAX
# An E4M3 output's scale over V's: the rounded weights of a row sum to at most 1 + 2**-4, so the
# output stays within 448 of it (E4M3 has no infinity: past 448 it would be NaN).
O_HEADROOM = 1.0 + 2.0**-4
# Built graphs kept per Fp8Attend (least recently used dropped): a plan per shape, and a new
# prefix length after a cached document is a new shape.
MAX_GRAPHS = 64
# A call with fewer keys than this goes to the bf16 kernel: rounding Q, K and V costs more than
# the FP8 kernel saves there. On an H100 an 8K chunk after 8K keys took 3.43 ms in FP8 against
# 3.02 in bf16, after 120K keys 20.3 against 28.0 (bench/results/fp8_h100.md): level near 14K.
# It also keeps FP8's rounding of the softmax's weights out of short documents, where it buys
# nothing (bench/results/fp8_retrieval_h100.fp8-attention.md: with every call in FP8 the
# first answer token's logits moved 1-9% against the unquantized cache, the FP8 cache alone 1-2%).
MIN_FP8_KEYS = 16384


def quantize_tensor(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [B, N, L, D] (any strides) -> (E4M3 [B, L, N, D] contiguous, seen as [B, N, L, D];
    descale [1, 1, 1, 1] fp32): value = data * descale, x's largest |value| -> 448. No sync: the
    scale stays on the device. On CUDA one Triton pass after the reduction
    (cudnn_fp8_kernels.py), elsewhere torch: the same numbers."""
    largest = torch.linalg.vector_norm(x, float("inf")).float()  # one pass, no temporary
    descale = (largest / FP8_MAX).clamp(min=MIN_SCALE).reshape(1, 1, 1, 1)
    kernels = triton_module("engine.attention.cudnn_fp8_kernels") if x.is_cuda else None
    if kernels is not None:
        return kernels.quantize_fused(x, descale).transpose(1, 2), descale
    data = to_fp8(x.transpose(1, 2).float() / descale.reshape(())).contiguous()
    return data.transpose(1, 2), descale


@functools.cache
def _handle(device_index: int) -> Any:
    """One cuDNN handle per device, shared by its graphs."""
    with on_device(torch.device("cuda", device_index)):
        return cudnn_frontend().create_handle()


@functools.cache
def cudnn_frontend() -> ModuleType | None:
    """cuDNN's Python frontend (the nvidia-cudnn-frontend wheel), or None where it is missing or
    does not load (no cuDNN library, no GPU driver)."""
    try:
        import cudnn
    except Exception:  # ImportError, or OSError from loading libcudnn
        return None
    return cudnn


class Fp8SdpaGraph:
    """One built sdpa_fp8 graph: q [B, N, L, D] against k, v [B, KV, S, D], all E4M3 in
    (batch, sequence, head, dim) memory order, no mask or a top-left causal one; out E4M3 (on
    Hopper and Ada, cuDNN's only choice) or out_dtype (Blackwell), and the log-sum-exps."""

    def __init__(
        self,
        *,
        batch: int,
        num_heads: int,
        num_q: int,
        num_kv_heads: int,
        num_k: int,
        head_dim: int,
        causal: bool,
        out_dtype: torch.dtype,
        device: torch.device,
        fp8_out: bool | None = None,
    ) -> None:
        """fp8_out: write E4M3 (default: below compute capability 10, where cuDNN has nothing
        else)."""
        cudnn = cudnn_frontend()
        if cudnn is None:
            raise RuntimeError("cuDNN's frontend (nvidia-cudnn-frontend) is not installed.")
        self.device = device
        if fp8_out is None:
            fp8_out = torch.cuda.get_device_capability(device)[0] < 10
        self.fp8_out, self.out_dtype = fp8_out, out_dtype
        self.out_shape = (batch, num_q, num_heads, head_dim)
        dt = cudnn.data_type
        self._cudnn = cudnn
        self.handle = _handle(device.index if device.index is not None else 0)
        graph = cudnn.pygraph(
            io_data_type=dt.FP8_E4M3,
            intermediate_data_type=dt.FLOAT,
            compute_data_type=dt.FLOAT,
            handle=self.handle,
        )

        def bshd(name: str, heads: int, rows: int, kind: Any) -> Any:
            return graph.tensor(
                name=name,
                dim=(batch, heads, rows, head_dim),
                stride=(rows * heads * head_dim, head_dim, heads * head_dim, 1),
                data_type=kind,
            )

        def scalar(name: str) -> Any:
            return graph.tensor(
                name=name, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=dt.FLOAT
            )

        t = self._tensors = {
            "q": bshd("q", num_heads, num_q, dt.FP8_E4M3),
            "k": bshd("k", num_kv_heads, num_k, dt.FP8_E4M3),
            "v": bshd("v", num_kv_heads, num_k, dt.FP8_E4M3),
        }
        scalars = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
        t.update({name: scalar(name) for name in scalars})
        out, stats, _, amax_o = graph.sdpa_fp8(
            **{name: t[name] for name in ("q", "k", "v", *scalars)},
            attn_scale=1.0 / math.sqrt(head_dim),
            generate_stats=True,
            use_causal_mask=causal,
        )
        kinds = {torch.bfloat16: dt.BFLOAT16, torch.float16: dt.HALF}
        out.set_output(True).set_dim((batch, num_heads, num_q, head_dim))
        out.set_stride((num_q * num_heads * head_dim, head_dim, num_heads * head_dim, 1))
        out.set_data_type(dt.FP8_E4M3 if fp8_out else kinds[out_dtype])
        stats.set_output(True).set_dim((batch, num_heads, num_q, 1))
        stats.set_stride((num_heads * num_q, num_q, 1, 1)).set_data_type(dt.FLOAT)
        amax_o.set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1))
        amax_o.set_data_type(dt.FLOAT)
        t.update(o=out, stats=stats, amax_o=amax_o)
        with on_device(device):
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            graph.check_support()
            graph.build_plans()
        self._graph = graph
        self._workspace_bytes = graph.get_workspace_size()
        self._constants: dict[str, torch.Tensor] = {}

    def __call__(
        self,
        q: tuple[torch.Tensor, torch.Tensor],
        k: tuple[torch.Tensor, torch.Tensor],
        v: tuple[torch.Tensor, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(data, descale) of q, k and v as quantize_tensor makes them -> (out [B, N, L, D] in
        out_dtype, a view of [B, L, N, D] memory; lse [B, N, L] fp32)."""
        device = q[0].device
        batch, num_q, num_heads = self.out_shape[:3]
        out = torch.empty(
            self.out_shape, dtype=FP8_DTYPE if self.fp8_out else self.out_dtype, device=device
        )
        lse = torch.empty(batch, num_heads, num_q, 1, dtype=torch.float32, device=device)
        t = self._tensors
        pack = {t["q"]: q[0], t["k"]: k[0], t["v"]: v[0], t["o"]: out, t["stats"]: lse}
        pack.update({t["descale_q"]: q[1], t["descale_k"]: k[1], t["descale_v"]: v[1]})
        pack.update({t[name]: value for name, value in self._fixed(device).items()})
        if self.fp8_out:  # E4M3 against V's scale with headroom: within +-448 (O_HEADROOM)
            out_descale = v[1] * O_HEADROOM
            pack[t["scale_o"]] = out_descale.reciprocal()
        workspace = torch.empty(self._workspace_bytes, dtype=torch.uint8, device=device)
        with on_device(device):
            self._cudnn.set_stream(self.handle, torch.cuda.current_stream(device).cuda_stream)
            self._graph.execute(pack, workspace, handle=self.handle)
        if self.fp8_out:
            out = (out.float() * out_descale.reshape(())).to(self.out_dtype)
        return out.transpose(1, 2), lse.view(batch, num_heads, num_q)

    def _fixed(self, device: torch.device) -> dict[str, torch.Tensor]:
        if not self._constants:
            one = functools.partial(torch.full, (1, 1, 1, 1), dtype=torch.float32, device=device)
            self._constants = {
                "descale_s": one(1.0 / P_SCALE),
                "scale_s": one(P_SCALE),
                "scale_o": one(1.0),  # a wide output (fp8_out sets V's scale at each call)
                "amax_o": one(0.0),  # written by the kernel, unused
            }
        return self._constants


# (batch, heads, queries, KV heads, keys, head dim, causal, out dtype, device) -> a callable
# like Fp8SdpaGraph (tests on the CPU stand a reference in for cuDNN).
GraphFactory = Callable[..., Any]
# (q [B, N, L, D], k, v [B, KV, S, D], is_causal) -> (out [B, N, L, D], lse [B, N, L] fp32).
AttendFn = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, bool], tuple[torch.Tensor, torch.Tensor]
]


def _cudnn_graph(batch, num_heads, num_q, num_kv_heads, num_k, head_dim, causal, out_dtype, device):
    return Fp8SdpaGraph(
        batch=batch, num_heads=num_heads, num_q=num_q, num_kv_heads=num_kv_heads, num_k=num_k,
        head_dim=head_dim, causal=causal, out_dtype=out_dtype, device=device,
    )  # fmt: skip


class Fp8Attend:
    """An attend function for CudnnSplitBackend (q [B, N, L, D], k, v [B, KV, S, D], is_causal)
    -> (out [B, N, L, D] in q's dtype, lse [B, N, L] fp32), in FP8: each of q, k and v rounded to
    E4M3 against its own scale, then one cuDNN graph, built once per shape (the last MAX_GRAPHS
    kept). A shape cuDNN will not plan (its errors at build time) goes to `fallback`, the
    split backend's bf16 kernel, and is not asked again; so does a call of fewer than
    `min_keys` keys (MIN_FP8_KEYS: where FP8 does not pay)."""

    def __init__(
        self,
        fallback: AttendFn,
        graph_factory: GraphFactory | None = None,
        *,
        min_keys: int | None = None,
    ) -> None:
        self._fallback = fallback
        self._graph_factory = graph_factory or _cudnn_graph
        self._graphs: OrderedDict[tuple, Any] = OrderedDict()
        self.min_keys = MIN_FP8_KEYS if min_keys is None else min_keys

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if k.shape[2] < self.min_keys:
            return self._fallback(q, k, v, is_causal)
        batch, num_heads, num_q, head_dim = q.shape
        key = (
            batch,
            num_heads,
            num_q,
            k.shape[1],
            k.shape[2],
            head_dim,
            is_causal,
            q.dtype,
            q.device,
        )
        if key in self._graphs:
            self._graphs.move_to_end(key)
        else:
            try:
                self._graphs[key] = self._graph_factory(*key)
            except Exception:  # cuDNN's own errors: a shape it will not plan
                self._graphs[key] = None
            if len(self._graphs) > MAX_GRAPHS:
                self._graphs.popitem(last=False)
        graph = self._graphs[key]
        if graph is None:
            return self._fallback(q, k, v, is_causal)
        return graph(quantize_tensor(q), quantize_tensor(k), quantize_tensor(v))


@functools.cache
def is_fp8_attention_available(device: torch.device) -> bool:
    """Whether cuDNN's FP8 attention builds and runs here, both masks (Hopper or newer, a cuDNN
    that has it, its frontend installed): probed once with small calls, since the build, the
    driver and the GPU all have a say."""
    if device.type != "cuda" or cudnn_frontend() is None:
        return False
    try:
        # As CudnnSplitBackend calls it: the prefix part with its query heads folded onto the KV
        # heads (as many of each), no mask, two splits of its keys as a batch; the chunk itself
        # causal. A declined shape would go to the fallback: here it must not.
        def declined(*_args):
            raise RuntimeError("declined")

        attend = Fp8Attend(fallback=declined, min_keys=0)
        q = torch.randn(2, 2, 128, 128, device=device, dtype=torch.bfloat16)
        kv = torch.randn(2, 2, 256, 128, device=device, dtype=torch.bfloat16)
        results = [attend(q, kv, kv, False), attend(q[:1], q[:1], q[:1], True)]
        torch.cuda.synchronize(device)
        return all(bool(x.isfinite().all()) for result in results for x in result)
    except Exception:  # unsupported GPU, cuDNN too old, or the frontend's own errors
        return False
