"""The device a Triton kernel launches on: Triton uses the current CUDA device, which need not
be its tensors' (an engine on cuda:1)."""

from __future__ import annotations

import contextlib

import torch


def on_device(device: torch.device) -> contextlib.AbstractContextManager:
    """A context in which `device` is the current CUDA device: nothing to do on the CPU (Triton's
    interpreter) or where it already is."""
    if device.type != "cuda" or device.index in (None, torch.cuda.current_device()):
        return contextlib.nullcontext()
    return torch.cuda.device(device)
