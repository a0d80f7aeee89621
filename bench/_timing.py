"""Timing and peak memory of one run, the same way for the engine and for transformers.

CUDA: synchronize around the run and read torch.cuda.max_memory_allocated after resetting it,
so the peak counts what was allocated before the run (the weights, a preallocated KV cache) plus
the run's own peak. CPU: the process's peak resident set (VmHWM), reset through
/proc/self/clear_refs before the run, so it is the peak of this run alone (weights included).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

GiB = 1024**3


@dataclass
class Measurement:
    seconds: list[float] = field(default_factory=list)  # timed runs, warm-ups excluded
    peak_bytes: list[int] = field(default_factory=list)
    warmup_seconds: list[float] = field(default_factory=list)

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds)

    @property
    def peak_gib(self) -> float:
        return max(self.peak_bytes) / GiB


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    else:
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")  # "5": reset the peak resident set size (Linux >= 4.0)
        except OSError:
            pass


def _peak(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(
    run: Callable[[], torch.Tensor],
    *,
    device: torch.device,
    num_runs: int,
    num_warmup: int,
    on_result: Callable[[torch.Tensor], None] | None = None,
    log: Callable[[str], None] = print,
    label: str = "",
) -> Measurement:
    """Warm up, then time num_runs calls of run(); on_result gets the last run's output."""
    result = Measurement()
    for index in range(num_warmup + num_runs):
        gc.collect()
        _reset_peak(device)
        started = time.perf_counter()
        output = run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - started
        peak = _peak(device)
        is_warmup = index < num_warmup
        (result.warmup_seconds if is_warmup else result.seconds).append(elapsed)
        if not is_warmup:
            result.peak_bytes.append(peak)
        log(
            f"  {label} {'warm-up' if is_warmup else 'run'} {index}: {elapsed:.3f} s, "
            f"peak {peak / GiB:.2f} GiB"
        )
        if index == num_warmup + num_runs - 1 and on_result is not None:
            on_result(output)
        del output
    return result


def graph_call_us(calls: list[Callable[[], object]], warm: int = 3, replays: int = 10) -> float:
    """GPU microseconds per call of `calls` captured in one CUDA graph (as an engine's decode step
    runs them: no launch cost between kernels), from CUDA events around `replays` replays after
    `warm`. The first call runs once on a side stream before the capture (Triton's compile,
    cuBLAS's workspace)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        calls[0]()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    for _ in range(warm):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / (replays * len(calls))
