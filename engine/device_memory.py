"""Free and peak memory of a device, the same question asked of CUDA or of the host."""

from __future__ import annotations

import os
import resource
import sys

import torch


def free_bytes(device: torch.device) -> int:
    """Bytes a new allocation can still get: CUDA free memory plus what the caching allocator
    holds unused; on the CPU the kernel's MemAvailable."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        unused_reserved = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + unused_reserved)
    return _host_available_bytes()


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_bytes(device: torch.device) -> int:
    """Peak allocated bytes since reset_peak on CUDA; the process's peak RSS on the CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def release_cached(device: torch.device) -> None:
    """Give back what an out-of-memory chunk left in the allocator's cache."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _host_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
