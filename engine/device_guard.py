"""What launching our Triton kernels needs: their module, where Triton imports (triton_module),
the device they launch on (on_device: Triton uses the current CUDA device, which need not be
their tensors', as for an engine on cuda:1), and its SMs, which size their grids (sm_count)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
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


# Programmatic dependent launch (Hopper and newer; EngineConfig.pdl): the kernels launched with it
# may start while the kernel before them in the stream finishes, and wait (griddepcontrol.wait)
# before they read what earlier kernels wrote or write anything; what no kernel of the step writes
# (weights) they may read before. A kernel lets the next one launch (launch_dependents) only after
# its own wait, so that when a kernel starts every kernel but the one just before it has ended.
# Process-wide, as torch.compile's own switch for the kernels it generates
# (torch._inductor.config.triton.enable_pdl), which set_programmatic_launch sets too.
_PROGRAMMATIC_LAUNCH = {"on": False, "set_inductor": False}


def set_programmatic_launch(device: torch.device, on: bool) -> bool:
    """Turn programmatic dependent launch on (where it runs: a CUDA device of compute capability
    9.0 or newer, compiled Triton, not its interpreter) or off, for our decode kernels and
    torch.compile's (off restores torch.compile's switch if this turned it on); -> whether it
    is on."""
    on = bool(
        on
        and _has_programmatic_launch(device)
        and os.environ.get("TRITON_INTERPRET") != "1"
        and triton_module("triton.language") is not None
    )
    _PROGRAMMATIC_LAUNCH["on"] = on
    with contextlib.suppress(ImportError, AttributeError):
        import torch._inductor.config as inductor_config

        if on and not inductor_config.triton.enable_pdl:
            inductor_config.triton.enable_pdl = True
            _PROGRAMMATIC_LAUNCH["set_inductor"] = True
        elif not on and _PROGRAMMATIC_LAUNCH["set_inductor"]:
            inductor_config.triton.enable_pdl = False
            _PROGRAMMATIC_LAUNCH["set_inductor"] = False
    return on


def is_programmatic_launch_on() -> bool:
    """Whether our kernels launch with programmatic dependent launch in this process."""
    return _PROGRAMMATIC_LAUNCH["on"]


def launch_options(device: torch.device) -> dict[str, bool]:
    """A PDL-aware kernel's launch keywords on `device`: its USE_PDL constexpr, and Triton's
    launch_pdl where programmatic dependent launch is on and the device has it (an engine on an
    older GPU in the same process launches the plain way)."""
    if _PROGRAMMATIC_LAUNCH["on"] and _has_programmatic_launch(device):
        return {"USE_PDL": True, "launch_pdl": True}
    return {"USE_PDL": False}


@functools.cache
def _has_programmatic_launch(device: torch.device) -> bool:
    """A CUDA device of compute capability 9.0 or newer (griddepcontrol)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9
