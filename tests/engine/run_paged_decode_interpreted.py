"""Runs every paged decode case under Triton's CPU interpreter; writes the results as JSON.

Usage (test_paged_decode.py starts it): TRITON_INTERPRET=1 python -m
tests.engine.run_paged_decode_interpreted OUT.json. The variable must be set before triton.jit
decorates the kernels, hence a process of its own.

Two defects of Triton's interpreter are patched here, in this process only; neither touches
what the kernel computes on a GPU:
- (3.6; fixed by 3.9) scalars are 1-element arrays, and `range(begin, end)` with tensor bounds
  calls int() on them, which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted");
- (3.6 and 3.9) tl.dot on bfloat16 multiplies the raw 16-bit patterns (bf16 is held as
  uint16): widen them to fp32 first, as the tensor cores' fp32 accumulation sees them.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
import triton.language as tl
from triton.runtime import interpreter


def _patch_interpreter() -> None:
    patch_lang_tensor = interpreter._patch_lang_tensor

    def patched_lang_tensor(tensor, scope) -> None:
        patch_lang_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    interpreter._patch_lang_tensor = patched_lang_tensor
    create_dot = interpreter.InterpreterBuilder.create_dot

    def widen(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        wide = (handle.data.astype(np.uint32) << 16).view(np.float32)
        return interpreter.TensorHandle(wide, tl.float32)

    def patched_dot(self, a, b, *rest, **kwargs):
        return create_dot(self, widen(a), widen(b), *rest, **kwargs)

    interpreter.InterpreterBuilder.create_dot = patched_dot
    # fp32 -> E4M3 as the GPU's cvt.rn.satfinite does it (round to nearest even): the
    # interpreter's own downcast truncates, and its rounding drops the carry into the exponent
    # (1.97 became 1.0, not 2.0). torch's cast rounds alike; values past 448 are clamped before.
    # fp32 -> bf16 likewise to nearest even (cvt.rn.bf16.f32), where the interpreter truncates.
    convert_float = interpreter._convert_float

    # And E4M3 -> fp32 / fp16 as the GPU's cvt does it: the interpreter's widening reads the
    # E4M3 NaN (S.1111.111, a byte of its own: E4M3 has no inf) as +-480.
    widened = {tl.float32: np.float32, tl.float16: np.float16}

    def patched_convert_float(data, input_dtype, output_dtype, rounding_mode):
        if input_dtype == tl.float32 and output_dtype == tl.float8e4nv:
            wide = torch.from_numpy(np.ascontiguousarray(data).view(np.float32))
            return wide.to(torch.float8_e4m3fn).view(torch.uint8).numpy().reshape(data.shape)
        if input_dtype == tl.float32 and output_dtype == tl.bfloat16:  # nearest even, as cvt.rn
            wide = torch.from_numpy(np.ascontiguousarray(data).view(np.float32))
            return (
                wide.to(torch.bfloat16)
                .view(torch.int16)
                .numpy()
                .view(np.uint16)
                .reshape(data.shape)
            )
        if input_dtype == tl.float8e4nv and output_dtype in widened:
            raw = torch.from_numpy(np.ascontiguousarray(data).view(np.uint8))
            wide = raw.view(torch.float8_e4m3fn).float().numpy()
            return wide.astype(widened[output_dtype]).reshape(data.shape)
        return convert_float(data, input_dtype, output_dtype, rounding_mode)

    interpreter._convert_float = patched_convert_float


def start_interpreted() -> None:
    """A runner's start: refuse a process without TRITON_INTERPRET=1 (it must be set before
    triton decorates the kernels), patch the interpreter, quiet NumPy's warnings on masked
    lanes (NaN, inf, division by zero: the kernels mask them on purpose), one thread."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("set TRITON_INTERPRET=1 (before triton decorates the kernels)")
    _patch_interpreter()
    np.seterr(all="ignore")
    torch.set_num_threads(1)


def check_fused_write() -> dict:
    """write_slots_fused against index_copy_: 3 KV heads (padded to 4) of D=80 (to 128), K
    contiguous and V a view of a wider projection, slots in shuffled order."""
    from engine.attention.slot_write import write_slots_fused

    gen = torch.Generator().manual_seed(3)
    tokens, kv, dim = 5, 3, 80
    k = torch.randn(tokens, kv, dim, generator=gen).bfloat16()
    wide = torch.randn(tokens, 2 * kv * dim, generator=gen).bfloat16()
    v = wide[:, kv * dim :].view(tokens, kv, dim)
    slots = torch.tensor([9, 2, 14, 0, 7])
    k_cache, v_cache = (torch.zeros(4, 4, kv, dim, dtype=torch.bfloat16) for _ in range(2))
    write_slots_fused(k, v, k_cache, v_cache, slots)
    k_ref, v_ref = (torch.zeros(4, 4, kv, dim, dtype=torch.bfloat16) for _ in range(2))
    k_ref.view(-1, kv, dim).index_copy_(0, slots, k)
    v_ref.view(-1, kv, dim).index_copy_(0, slots, v)
    return {"k_equal": torch.equal(k_cache, k_ref), "v_equal": torch.equal(v_cache, v_ref)}


def main(out_path: str) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("set TRITON_INTERPRET=1 (before triton decorates the kernels)")
    _patch_interpreter()
    np.seterr(divide="ignore")  # log2(0) of an empty split is -inf on purpose
    torch.set_num_threads(1)
    from tests.engine.paged_decode_cases import CASES, run_case

    results = {name: run_case(case, torch.device("cpu")) for name, case in CASES.items()}
    results["write_slots_fused"] = check_fused_write()
    with open(out_path, "w") as handle:
        json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
