"""A causal flash-attention forward for the CPU (fp32, AVX-512), built on first use.

Why it exists: on the CPU, SDPA runs aten::_scaled_dot_product_flash_attention_for_cpu, which
spends its time in MKL sgemm, and MKL takes its slow generic (non-AVX-512) path on AMD CPUs.
Measured on an AMD EPYC (Zen 5, avx512f/bw/vl/dq, 2 cores), causal q [1, 9, 8192, 64] against
GQA k/v [1, 3, 8192, 64]: SDPA 0.48 s, ~160 GFLOP/s of useful causal FLOPs (4*H*T*T*D/2);
the same kernel with MKL forced onto its AVX-512 path ran at ~320 GFLOP/s and oneDNN GEMMs
at ~490. csrc/cpu_flash_attn.cpp does the attention with AVX-512 intrinsics and no BLAS:
0.18-0.23 s there (~340-430 GFLOP/s, 2.2-2.7x SDPA; this VM's timings drift by 25%).

The extension is compiled for AVX-512 (F, BW, VL, DQ) and FMA, so it is only built, and only
loaded, where torch reports that CPU capability; elsewhere load_cpu_flash() returns None and
callers keep SDPA.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import torch

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv

logger = logging.getLogger(__name__)

_SOURCE = Path(__file__).parent / "csrc" / "cpu_flash_attn.cpp"
# The module's name and its folder in torch's extensions cache; ninja rebuilds it there
# whenever the source or the flags change.
_EXTENSION_NAME = "longdoc_cpu_flash_attn_v2"
_CFLAGS = ["-O3", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-fopenmp"]
# Without OpenMP in the extension, at::parallel_for (a header template) runs single-threaded.
# The process already holds torch's libgomp (same soname), so the loader reuses it: one
# thread pool, sized by torch.set_num_threads.
_LDFLAGS = ["-fopenmp"]


@functools.cache
def load_cpu_flash() -> ModuleType | None:
    """The compiled extension, or None (the reason logged at debug level) where it cannot be
    built or the CPU lacks AVX-512. Loads once per process. The first build takes ~20 s (a C++
    compiler, and the `ninja` executable on PATH, are needed each time: torch runs ninja to
    check the cached binary); torch keeps the binary in its extensions folder. The engine
    leaves PATH to its caller (worker/model/kernel_build.py puts the ninja wheel's folder there)."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        logger.debug("CPU flash attention off: CPU capability %s, not AVX512", capability)
        return None
    try:
        from torch.utils.cpp_extension import _get_build_directory, load

        build_directory = Path(_get_build_directory(_EXTENSION_NAME, verbose=False))
        with build_lock(build_directory):
            return load(
                name=_EXTENSION_NAME,
                sources=[str(_SOURCE)],
                extra_cflags=_CFLAGS,
                extra_ldflags=_LDFLAGS,
                build_directory=str(build_directory),
                verbose=False,
            )
    except Exception as exc:  # a missing compiler or ninja, a failed build: keep SDPA
        logger.debug("CPU flash attention off: building the extension failed: %s", exc)
        return None


@contextlib.contextmanager
def build_lock(build_directory: Path) -> Iterator[None]:
    """Hold an exclusive flock on the build folder and remove torch's own `lock` file there.

    torch guards a build with a plain file (`lock`, created with O_EXCL) and waits, forever,
    while it exists; a process killed mid-build (a test run stopped, a worker killed) leaves it
    behind and every later load hangs. The kernel frees an flock when its holder dies, so every
    builder of this folder takes this one first, and a `lock` file found while holding it was
    left by a process that is gone."""
    build_directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not a POSIX system: torch's own lock alone
        yield
        return
    fd = os.open(build_directory / "longdoc.flock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        stale = build_directory / "lock"
        if stale.exists():
            logger.warning("Removing a stale build lock left by a stopped process: %s", stale)
            stale.unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def supports_head_dim(head_dim: int) -> bool:
    """Whether the kernel takes this head dim (multiples of 16 up to 256)."""
    return 0 < head_dim <= 256 and head_dim % 16 == 0


def cpu_flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    start: int,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bottom-right causal attention, scale 1/sqrt(D): query i (position start + i) attends to
    keys [0, start + i].

    q: [T, H, D] fp32; k, v: [start + T, KV, D] fp32 with H a multiple of KV (GQA: query head h
    reads KV head h // (H // KV)). Any strides whose last dim is contiguous are read in place
    (e.g. a slice of a paged cache). Returns out, a new [T, H, D] tensor unless given. Runs on
    torch's intra-op threads. Needs load_cpu_flash() to be non-None.
    """
    ext = load_cpu_flash()
    if ext is None:
        raise RuntimeError("the CPU flash-attention extension is unavailable")
    _check_causal_inputs(q, k, v, start)
    if out is None:
        out = torch.empty(q.shape, dtype=torch.float32)  # [T, H, D]
    return ext.causal_attention(q, k, v, start, out)


def _check_causal_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> None:
    """The kernel's own checks, made before the call: an error raised inside an extension
    built by another compiler than torch's can crash the process instead of raising (seen with
    torch 2.11's CUDA build), so bad inputs never reach it."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype != torch.float32 or t.dim() != 3 or t.device.type != "cpu":
            raise RuntimeError(
                f"{name} must be a 3-D float32 CPU tensor, got {t.dtype} {t.dim()}-D"
            )
    T, H, D = q.shape
    if k.shape != v.shape or k.shape[0] != start + T or k.shape[2] != D or start < 0:
        raise RuntimeError(f"k and v must be [start + T, KV, {D}], got {tuple(k.shape)}")
    if k.shape[1] == 0 or H % k.shape[1] != 0:
        raise RuntimeError(f"query heads ({H}) must be a multiple of KV heads ({k.shape[1]})")
    if not supports_head_dim(D):
        raise RuntimeError(f"head dim {D} is not a multiple of 16 up to 256")


def cpu_paged_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    max_context_len: int | None = None,
) -> torch.Tensor:
    """One query per row against its paged KV (see engine/attention/decode.py): q [B, H, D]
    fp32, caches [blocks, block_size, KV, D], block_tables [B, max_blocks] int32, context_lens
    [B] int32 -> [B, H, D]. All rows in one parallel region."""
    ext = load_cpu_flash()
    if ext is None:
        raise RuntimeError("the CPU flash-attention extension is unavailable")
    del max_context_len  # the kernel reads each row's own length
    out = torch.empty(q.shape, dtype=torch.float32)
    return ext.paged_decode(q, k_cache, v_cache, block_tables, context_lens, out)


class CpuFlashBackend(AttentionBackend):
    """The CPU backend where the extension loads (fp32, AVX-512): one bottom-right causal call
    per step over the chunk's cached prefix and its own keys, no split, no K/V repeat."""

    name = "cpu_flash"
    materializes_scores = False

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        if meta.start == 0:
            keys, values = k, v  # [T, KV, D]: nothing cached before this step
        else:
            keys, values = gather_kv(k_cache, meta), gather_kv(v_cache, meta)  # [ctx, KV, D]
        return cpu_flash_attention(q, keys, values, meta.start)  # [T, H, D]


def is_cpu_flash_available(dtype: torch.dtype, head_dim: int | None) -> bool:
    return (
        dtype == torch.float32
        and (head_dim is None or supports_head_dim(head_dim))
        and load_cpu_flash() is not None
    )
