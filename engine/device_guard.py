"""What launching our Triton kernels needs: their module, where Triton imports (triton_module),
the device they launch on (on_device: Triton uses the current CUDA device, which need not be
their tensors', as for an engine on cuda:1), and its SMs, which size their grids (sm_count)."""

from __future__ import annotations

import contextlib
import functools
import importlib
from types import ModuleType

import torch

# Triton's interpreter on the CPU has no SMs: a stand-in count, so that grids planned from it
# still split work there (long contexts, narrow products) as a small GPU would.
INTERPRETER_NUM_SMS = 4


@functools.cache
def triton_module(name: str) -> ModuleType | None:
    """The kernels' module `name` (it imports triton), or None where Triton is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:  # no triton
        return None


def on_device(device: torch.device) -> contextlib.AbstractContextManager:
    """A context in which `device` is the current CUDA device: nothing to do on the CPU (Triton's
    interpreter) or where it already is."""
    if device.type != "cuda" or device.index in (None, torch.cuda.current_device()):
        return contextlib.nullcontext()
    return torch.cuda.device(device)


@functools.cache
def sm_count(device: torch.device) -> int:
    """The device's SMs (INTERPRETER_NUM_SMS off CUDA)."""
    if device.type != "cuda":
        return INTERPRETER_NUM_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count
