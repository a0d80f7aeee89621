"""FP8 prefill attention over the FP8 KV cache (CUDA, Hopper or newer, with cuDNN's frontend).

A long chunk (more than SHORT_CHUNK_QUERIES queries) of T queries after `start` cached tokens
attends in one cuDNN sdpa_fp8 call: Q, K and V in E4M3, the softmax's probabilities P in E4M3
(scale 448, as FP8 attention kernels do), fp32 accumulation, the output in the model's dtype; a
bottom-right causal mask (query t sees keys up to start + t) and the KV heads as they are
(grouped-query attention inside the kernel). Its FP8 tensor cores do the two products at about
twice the bf16 rate, and it reads a byte a key value where the bf16 path widens the pages into a
2-byte scratch first (Fp8KVBackend).

cuDNN takes one scale per tensor. The cache holds one per token and KV head, so each call first
re-expresses the sequence's keys and values against one scale each (requantize_pages: the largest
of their scales, so every value stays within E4M3's range; a token with a smaller scale loses
the low bits that fall under E4M3's subnormals, 2^-9 of the largest): one pass over the pages
into a contiguous [keys, KV, D] scratch of one byte a value. The queries get one scale per chunk.

Plans: cuDNN builds one per shape (tens to hundreds of milliseconds). Queries are padded to a
multiple of QUERY_BUCKET and keys to KEY_BUCKET, and the real lengths go in as device tensors
(its padding mask), so a 128K prompt in 8K chunks needs at most a plan per key bucket.

Short chunks (a question after its document) keep Fp8KVBackend's path: a kernel with no plan.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

import torch

from engine.attention.base import AttentionMetadata
from engine.attention.cudnn_split import SHORT_CHUNK_QUERIES
from engine.attention.fp8_kv import Fp8KVBackend, QuantizedPages, write_pages
from engine.device_guard import triton_module
from engine.models.fp8 import FP8_DTYPE, FP8_MAX, MIN_SCALE, to_fp8

QUERY_BUCKET = 512
KEY_BUCKET = 8192
# The softmax's probabilities in [0, 1] scaled by 448 into E4M3 (and back by 1/448).
P_SCALE = FP8_MAX


def bucket(n: int, size: int) -> int:
    return -(-n // size) * size


def requantize_pages(
    pages: QuantizedPages, block_table: torch.Tensor, num_tokens: int, out_tokens: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first num_tokens tokens of the blocks of block_table [N] against one scale: (E4M3
    [out_tokens, KV, D], the rows past num_tokens zero; descale [1, 1, 1, 1] fp32), value =
    data * descale. The scale is the largest of the tokens' own (no sync: it stays on the
    device). On CUDA one Triton kernel, elsewhere torch: the same numbers."""
    num_kv_heads, head_dim = pages.data.shape[2:]
    used = pages.scale.index_select(0, block_table).view(-1, num_kv_heads)[:num_tokens]
    descale = used.amax().clamp(min=MIN_SCALE).reshape(1, 1, 1, 1)
    kernels = triton_module("engine.attention.fp8_kv_kernels") if pages.data.is_cuda else None
    if kernels is not None:
        data = kernels.requantize_pages_fused(
            pages.data, pages.scale, block_table, descale, num_tokens, out_tokens
        )
        return data, descale
    data = pages.data.index_select(0, block_table).view(-1, num_kv_heads, head_dim)[:num_tokens]
    ratio = used / descale.view(1, 1)  # [tokens, KV], at most 1
    out = torch.zeros(out_tokens, num_kv_heads, head_dim, dtype=torch.uint8, device=data.device)
    out = out.view(FP8_DTYPE)
    out[:num_tokens] = to_fp8(data.float() * ratio[..., None])
    return out, descale


def quantize_queries(q: torch.Tensor, out_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q [T, H, D] -> (E4M3 [out_rows, H, D], the rows past T zero; descale [1, 1, 1, 1])."""
    descale = (q.abs().amax().float() / FP8_MAX).clamp(min=MIN_SCALE).reshape(1, 1, 1, 1)
    out = torch.zeros(out_rows, *q.shape[1:], dtype=torch.uint8, device=q.device).view(FP8_DTYPE)
    out[: q.shape[0]] = to_fp8(q.float() / descale.view(1, 1, 1))
    return out, descale


@functools.cache
def cudnn_frontend() -> ModuleType | None:
    """cuDNN's Python frontend (the nvidia-cudnn-frontend wheel), or None where it is missing or
    does not load (no cuDNN library, no GPU driver)."""
    try:
        import cudnn
    except Exception:  # ImportError, or OSError from loading libcudnn
        return None
    return cudnn


class SdpaGraph:
    """One built cuDNN attention graph: q [num_q, H, D] against k, v [num_k, KV, D] (token-major,
    as the engine holds them), bottom-right causal, the real lengths (at most these) passed at
    each call. fp8: sdpa_fp8 with E4M3 inputs and per-tensor descales; else sdpa on q's dtype.
    out_dtype: bfloat16 or float16.

    On Hopper (and Ada) cuDNN's FP8 kernel writes E4M3 only (cuDNN 9.19: "sdpa fp8 forward with
    HALF/BFLOAT16 output is only supported on Blackwell"): there the output is E4M3 against V's
    scale, which bounds it (each output row is a convex combination of V's rows, so no value
    exceeds V's largest), then widened to out_dtype. One more rounding, within 2**-4."""

    def __init__(
        self,
        *,
        num_q: int,
        num_k: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        fp8: bool,
        out_dtype: torch.dtype,
        in_dtype: torch.dtype = torch.bfloat16,
        fp8_out: bool | None = None,
    ) -> None:
        """fp8_out: the FP8 graph writes E4M3 (default: below compute capability 10, where
        cuDNN has no other)."""
        cudnn = cudnn_frontend()
        if cudnn is None:
            raise RuntimeError("cuDNN's frontend (nvidia-cudnn-frontend) is not installed.")
        self.num_q, self.num_k, self.fp8 = num_q, num_k, fp8
        if fp8_out is None:
            fp8_out = fp8 and torch.cuda.get_device_capability()[0] < 10
        self.fp8_out = fp8 and fp8_out
        dt = cudnn.data_type
        kinds = {torch.bfloat16: dt.BFLOAT16, torch.float16: dt.HALF}
        io = dt.FP8_E4M3 if fp8 else kinds[in_dtype]
        self.handle = cudnn.create_handle()
        graph = cudnn.pygraph(
            io_data_type=io,
            intermediate_data_type=dt.FLOAT,
            compute_data_type=dt.FLOAT,
            handle=self.handle,
        )

        def tokens(name: str, rows: int, heads: int) -> Any:  # [1, heads, rows, D], token-major
            return graph.tensor(
                name=name,
                dim=(1, heads, rows, head_dim),
                stride=(rows * heads * head_dim, head_dim, heads * head_dim, 1),
                data_type=io,
            )

        def scalar(name: str, kind: Any) -> Any:
            return graph.tensor(name=name, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=kind)

        t = self._tensors = {
            "q": tokens("q", num_q, num_heads),
            "k": tokens("k", num_k, num_kv_heads),
            "v": tokens("v", num_k, num_kv_heads),
            "seq_len_q": scalar("seq_len_q", dt.INT32),
            "seq_len_kv": scalar("seq_len_kv", dt.INT32),
        }
        # Causal with its diagonal at the bottom right: query t sees keys up to start + t (the
        # bound's name differs between the two operations' bindings).
        bound = "right_bound" if fp8 else "diagonal_band_right_bound"
        options = dict(
            attn_scale=1.0 / math.sqrt(head_dim),
            generate_stats=False,
            use_causal_mask=False,
            **{bound: 0},
            diagonal_alignment=cudnn.diagonal_alignment.BOTTOM_RIGHT,
            use_padding_mask=True,
            seq_len_q=t["seq_len_q"],
            seq_len_kv=t["seq_len_kv"],
        )
        if fp8:
            for name in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o"):
                t[name] = scalar(name, dt.FLOAT)
            out, _, _, amax_o = graph.sdpa_fp8(
                q=t["q"], k=t["k"], v=t["v"],
                descale_q=t["descale_q"], descale_k=t["descale_k"], descale_v=t["descale_v"],
                descale_s=t["descale_s"], scale_s=t["scale_s"], scale_o=t["scale_o"],
                **options,
            )  # fmt: skip
            amax_o.set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1))
            amax_o.set_data_type(dt.FLOAT)
            t["amax_o"] = amax_o
        else:
            out, _ = graph.sdpa(q=t["q"], k=t["k"], v=t["v"], **options)
        out.set_output(True).set_dim((1, num_heads, num_q, head_dim))
        out.set_stride((num_q * num_heads * head_dim, head_dim, num_heads * head_dim, 1))
        out.set_data_type(dt.FP8_E4M3 if self.fp8_out else kinds[out_dtype])
        t["o"] = out
        self.out_dtype = out_dtype
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        self._graph = graph
        self._cudnn = cudnn
        self._workspace_bytes = graph.get_workspace_size()
        self._constants: dict[str, torch.Tensor] = {}

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        num_q: int,
        num_k: int,
        descales: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """q [self.num_q, H, D], k, v [self.num_k, KV, D] (E4M3 with descales (q, k, v) [1, 1,
        1, 1] fp32 when fp8); the first num_q queries and num_k keys are real -> [self.num_q, H,
        D] in out_dtype, rows past num_q undefined."""
        device = q.device
        out = torch.empty(
            q.shape, dtype=FP8_DTYPE if self.fp8_out else self.out_dtype, device=device
        )
        t = self._tensors
        pack = {t["q"]: q, t["k"]: k, t["v"]: v, t["o"]: out}
        pack[t["seq_len_q"]] = torch.full((1, 1, 1, 1), num_q, dtype=torch.int32, device=device)
        pack[t["seq_len_kv"]] = torch.full((1, 1, 1, 1), num_k, dtype=torch.int32, device=device)
        if self.fp8:
            if descales is None:
                raise ValueError("An FP8 attention graph needs the descales of q, k and v.")
            for name, value in zip(("descale_q", "descale_k", "descale_v"), descales, strict=True):
                pack[t[name]] = value
            for name, value in self._fixed(device).items():
                pack[t[name]] = value
            if self.fp8_out:  # E4M3 against V's scale: O / descale_v is within +-448
                pack[t["scale_o"]] = descales[2].reciprocal()
        workspace = torch.empty(self._workspace_bytes, dtype=torch.uint8, device=device)
        self._cudnn.set_stream(self.handle, torch.cuda.current_stream(device).cuda_stream)
        self._graph.execute(pack, workspace, handle=self.handle)
        if self.fp8_out:
            return (out.float() * descales[2].view(1, 1, 1)).to(self.out_dtype)
        return out

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


@functools.cache
def is_fp8_attention_available(device: torch.device) -> bool:
    """Whether cuDNN's FP8 attention builds and runs here (Hopper or newer, a cuDNN that has it,
    its frontend installed): probed once with a small call, since the build, the driver and the
    GPU all have a say."""
    if device.type != "cuda" or cudnn_frontend() is None:
        return False
    try:
        graph = SdpaGraph(
            num_q=128, num_k=256, num_heads=4, num_kv_heads=2, head_dim=128,
            fp8=True, out_dtype=torch.bfloat16,
        )  # fmt: skip
        q = torch.zeros(128, 4, 128, dtype=torch.uint8, device=device).view(FP8_DTYPE)
        k = torch.zeros(256, 2, 128, dtype=torch.uint8, device=device).view(FP8_DTYPE)
        one = torch.ones(1, 1, 1, 1, device=device)
        graph(q, k, k, 128, 256, (one, one, one))
        torch.cuda.synchronize(device)
        return True
    except Exception:  # unsupported GPU, cuDNN too old, or the frontend's own errors
        return False


class CudnnFp8Backend(Fp8KVBackend):
    """Fp8KVBackend with long prefill chunks attending in FP8 through cuDNN (module docstring).
    Everything else (short chunks, decode rows outside the paged kernel, the CPU) goes through
    Fp8KVBackend's widened scratch and the inner backend."""

    def __init__(self, inner, graph_factory=None) -> None:
        """graph_factory(num_q, num_k, num_heads, num_kv_heads, head_dim, out_dtype) -> a callable
        like SdpaGraph (tests on the CPU stand a reference in for cuDNN)."""
        super().__init__(inner)
        self.name = f"{inner.name}+fp8"  # long chunks in FP8, the rest through inner
        self._graph_factory = graph_factory or _fp8_graph
        self._graphs: dict[tuple, Any] = {}

    def forward(self, q, k, v, k_cache, v_cache, meta):
        num_q = q.shape[0]
        pages: AttentionMetadata = meta.extra["fp8_pages"]
        num_k = pages.context_len
        rows, keys = bucket(num_q, QUERY_BUCKET), bucket(num_k, KEY_BUCKET)
        graph = self._graph(rows, keys, q, k) if num_q > SHORT_CHUNK_QUERIES else None
        if graph is None:  # a short chunk, or a shape cuDNN declined: the widened path
            return super().forward(q, k, v, k_cache, v_cache, meta)
        write_pages(k, v, k_cache, v_cache, pages.slot_mapping)
        table = pages.block_table.long()
        k8, k_descale = requantize_pages(k_cache, table, num_k, keys)
        v8, v_descale = requantize_pages(v_cache, table, num_k, keys)
        q8, q_descale = quantize_queries(q, rows)
        out = graph(q8, k8, v8, num_q, num_k, (q_descale, k_descale, v_descale))
        return out[:num_q]

    def _graph(self, rows: int, keys: int, q: torch.Tensor, k: torch.Tensor) -> Any:
        """The plan for these buckets, built once; None where cuDNN declines it (remembered)."""
        key = (rows, keys, q.shape[1], k.shape[1], q.shape[2], q.dtype)
        if key not in self._graphs:
            try:
                self._graphs[key] = self._graph_factory(*key)
            except Exception:  # cuDNN's own errors: not supported, out of plans
                self._graphs[key] = None
        return self._graphs[key]


def _fp8_graph(num_q, num_k, num_heads, num_kv_heads, head_dim, out_dtype) -> SdpaGraph:
    return SdpaGraph(
        num_q=num_q, num_k=num_k, num_heads=num_heads, num_kv_heads=num_kv_heads,
        head_dim=head_dim, fp8=True, out_dtype=out_dtype,
    )  # fmt: skip
