"""The prefill benchmark's results: hardware, rows, ratios, targets; as markdown and JSON."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

# Targets of the issue, and transformers' figures from ../shared/BASELINES.md for context.
GPU_TARGET_TFLOPS_32K = 600.0
GPU_TARGET_SECONDS_128K = 10.0
GPU_BUDGET_GIB = {32768: 24.0, 131072: 40.0}
CPU_TARGET_SPEEDUP = 1.3
BASELINE_NOTE = {
    "cuda": "BASELINES.md (H200, transformers 5.17): 32K chunk 8,192 358 TFLOP/s (chunk 2,048: 351), "
    "32K unchunked 526 TFLOP/s; 128K chunk 8,192 21.27 s",
    "cpu": "BASELINES.md (this CPU, SmolLM2-135M fp32): 8K unchunked 185 tokens/s, chunk 2,048 177",
}
# ||engine - transformers|| / ||transformers|| on the last position's fp32 logits. fp32: both
# sides compute the same function in a different order (~1e-6), so 1e-4 is generous. bf16/fp16:
# two correct implementations drift apart by far more (a bf16 unit roundoff is 2**-8, over 32
# layers), so the bound is relative to what transformers shows against itself in the same run:
#     tolerance = NOISE_FACTOR * rel_l2(transformers chunked, transformers unchunked) + NOISE_FLOOR
# measured at that prompt length, or at the longest shorter one when the unchunked forward was
# skipped. The fixed bf16 figure below is used when neither exists (or it is 0): 1.5 x the 0.039 that
# transformers showed against itself at 32K on the H200 (2026-11-30).
LOGITS_TOLERANCE = {"float32": 1e-4, "bfloat16": 6e-2, "float16": 6e-2}
NOISE_FACTOR, NOISE_FLOOR = 1.5, 1e-3


@dataclass
class Row:
    system: str  # "engine", "transformers chunked", "transformers unchunked"
    num_tokens: int
    chunk: int | None
    seconds: list[float]
    warmup_seconds: list[float]
    median_seconds: float
    tokens_per_second: float
    tflops: float
    peak_gib: float
    detail: dict[str, Any] = field(default_factory=dict)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    """The model name, with the family and model numbers where the name is generic: a virtual
    machine may say only "AMD EPYC" for a Zen 4 (family 25) and a Zen 5 (family 26), whose
    AVX-512 units differ two-fold in fp32 throughput."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if not line.strip():
                    break  # the first processor's block is enough
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def meminfo() -> dict[str, int]:
    """MemAvailable, Cached and Dirty in MiB, and the cgroup's memory limit where one is set."""
    info: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, value = line.split(":", 1)
            if name in ("MemAvailable", "Cached", "Dirty"):
                info[name + "_mib"] = int(value.split()[0]) // 1024
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        info["cgroup_memory_max_mib"] = -1 if limit == "max" else int(limit) // 2**20
    except (OSError, ValueError):
        pass
    return info


def hardware(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "device": str(device),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "triton": _version("triton"),
        "flash_attn": _version("flash-attn"),
        "flash_attn_4": _version("flash-attn-4"),
        "cutlass_dsl": _version("nvidia-cutlass-dsl"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            gpu_name=props.name,
            gpu_memory_gib=round(props.total_memory / 1024**3, 1),
            gpu_multiprocessors=props.multi_processor_count,
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
        )
    return info


def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """Per prompt length: engine speed and peak over each transformers mode's."""
    out = []
    for engine in (r for r in rows if _is_engine(r)):
        for other in rows:
            if other.num_tokens != engine.num_tokens or _is_engine(other):
                continue
            out.append(
                {
                    "num_tokens": engine.num_tokens,
                    "engine": engine.system,
                    "versus": other.system,
                    "speedup": other.median_seconds / engine.median_seconds,
                    "peak_ratio": engine.peak_gib / other.peak_gib,
                }
            )
    return out


def targets(rows: list[Row], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Each figure the issue sets a target for, with what this run measured."""
    out: list[dict[str, Any]] = []

    def add(figure: str, target: str, measured: float, ok: bool, unit: str) -> None:
        out.append(
            {
                "figure": figure,
                "target": target,
                "measured": f"{measured:.3g} {unit}".strip(),
                "ok": ok,
            }
        )

    is_gpu_preset = meta["device"].startswith("cuda") and meta["model"] == "llama3-8b-random"
    is_cpu_default = meta["device"] == "cpu" and str(meta["model"]).endswith(".gguf")
    for row in (r for r in rows if _is_engine(r)):
        who, n = f"{row.system}: {_k(row.num_tokens)}", row.num_tokens
        if is_gpu_preset and n == 32768:
            add(
                f"{who} TFLOP/s (chunk {row.chunk})",
                f">= {GPU_TARGET_TFLOPS_32K:g}",
                row.tflops,
                row.tflops >= GPU_TARGET_TFLOPS_32K,
                "TFLOP/s",
            )
        if is_gpu_preset and n == 131072:
            add(
                f"{who} time (chunk {row.chunk})",
                f"<= {GPU_TARGET_SECONDS_128K:g} s",
                row.median_seconds,
                row.median_seconds <= GPU_TARGET_SECONDS_128K,
                "s",
            )
        if is_gpu_preset and n in GPU_BUDGET_GIB:
            budget = GPU_BUDGET_GIB[n]
            add(
                f"{who} peak memory",
                f"<= {budget:g} GiB",
                row.peak_gib,
                row.peak_gib <= budget,
                "GiB",
            )
        others = [r.tokens_per_second for r in rows if r.num_tokens == n and not _is_engine(r)]
        if is_cpu_default and others:
            speedup = row.tokens_per_second / max(others)
            add(
                f"{who} speed vs transformers' faster mode",
                f">= {CPU_TARGET_SPEEDUP}x",
                speedup,
                speedup >= CPU_TARGET_SPEEDUP,
                "x",
            )
        err, tol = row.detail.get("logits_rel_err"), row.detail.get("logits_tolerance")
        if err is not None and tol is not None:
            add(
                f"{who} logits rel. L2 vs {row.detail['logits_reference']}",
                f"<= {tol:g}",
                err,
                err <= tol,
                "",
            )
    return out


def _is_engine(row: Row) -> bool:
    return row.system.startswith("engine")


def _table(headers: list[str], lines: list[list[Any]]) -> str:
    text = "| " + " | ".join(headers) + " |\n|" + "---|" * len(headers) + "\n"
    return text + "".join("| " + " | ".join(str(c) for c in line) + " |\n" for line in lines)


def write(out_dir: Path, label: str, meta: dict[str, Any], rows: list[Row]) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    all_ratios, all_targets = ratios(rows), targets(rows, meta)
    payload = {
        "meta": meta,
        "rows": [asdict(r) for r in rows],
        "ratios": all_ratios,
        "targets": all_targets,
    }
    json_path = out_dir / f"prefill_{label}.json"
    json_path.write_text(json.dumps(payload, indent=2) + "\n")
    md = [f"# Prefill benchmark: {label}\n"]
    md.append(
        "Generated by `bench/prefill.py`. Useful causal FLOPs as in BASELINES.md: linear layers "
        "+ half the attention square + the logits computed (formula in `bench/_flops.py`). "
        f"Median of {meta['runs']} runs after {meta['warmup']} warm-up(s).\n"
    )
    md.append(_table(["key", "value"], [[k, v] for k, v in meta.items() if k != "notes"]))
    for note in meta.get("notes", []):
        md.append(f"- {note}\n")
    md.append(f"- {BASELINE_NOTE['cuda' if meta['device'].startswith('cuda') else 'cpu']}\n")
    md.append("\n## Runs\n")
    md.append(
        _table(
            [
                "system",
                "tokens",
                "chunk",
                "median s",
                "runs s",
                "tokens/s",
                "TFLOP/s",
                "peak GiB",
                "logits rel. L2",
            ],
            [
                [
                    r.system,
                    f"{r.num_tokens:,}",
                    f"{r.chunk:,}" if r.chunk else ("planned" if _is_engine(r) else "none"),
                    f"{r.median_seconds:.3f}",
                    ", ".join(f"{s:.3f}" for s in r.seconds),
                    f"{r.tokens_per_second:,.0f}",
                    f"{r.tflops:.1f}",
                    f"{r.peak_gib:.2f}",
                    _fmt_err(r.detail.get("logits_rel_err")),
                ]
                for r in rows
            ],
        )
    )
    md.append("\n## Ratios (engine over transformers, same run)\n")
    md.append(
        _table(
            ["tokens", "engine", "versus", "speed-up", "peak memory ratio"],
            [
                [
                    f"{r['num_tokens']:,}",
                    r["engine"],
                    r["versus"],
                    f"{r['speedup']:.2f}x",
                    f"{r['peak_ratio']:.2f}",
                ]
                for r in all_ratios
            ],
        )
    )
    md.append("\n## Targets\n")
    md.append(
        _table(
            ["figure", "target", "measured", "met"],
            [
                [t["figure"], t["target"], t["measured"], "yes" if t["ok"] else "**no**"]
                for t in all_targets
            ],
        )
    )
    md_path = out_dir / f"prefill_{label}.md"
    md_path.write_text("".join(md))
    return md_path, json_path


def _k(num_tokens: int) -> str:
    return f"{num_tokens / 1024:g}K"


def _fmt_err(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def compare_logits(
    logits: dict[str, torch.Tensor], dtype_name: str, noise: dict, num_tokens: int
) -> dict:
    """Relative L2 of the engine's last-position logits against transformers' (unchunked if it
    ran), with the tolerance rule of bench/_report.py; noise carries transformers' own
    chunked-vs-unchunked figure from one prompt length to the next."""
    ref_name = "unchunked" if "unchunked" in logits else "chunked"
    if ref_name not in logits:
        return {}
    ref = logits[ref_name]

    def rel(a: torch.Tensor) -> float:
        return float((a - ref).norm() / ref.norm())

    out = {
        "logits_reference": f"transformers {ref_name}",
        "logits_rel_err": rel(logits["engine"]),
        "logits_max_abs_err": float((logits["engine"] - ref).abs().max()),
        "logits_argmax_equal": bool(logits["engine"].argmax() == ref.argmax()),
        "logits_tolerance": LOGITS_TOLERANCE[dtype_name],
    }
    if ref_name == "unchunked" and "chunked" in logits:
        noise["rel_l2"] = rel(logits["chunked"])
        noise["at_tokens"] = num_tokens
    # A zero figure (transformers bit-identical with itself, as on the CPU) says nothing about
    # the drift between two implementations: the fixed tolerance applies then.
    if dtype_name != "float32" and noise.get("rel_l2"):
        out["transformers_chunked_vs_unchunked_rel_err"] = noise["rel_l2"]
        out["transformers_noise_at_tokens"] = noise["at_tokens"]
        out["logits_tolerance"] = NOISE_FACTOR * noise["rel_l2"] + NOISE_FLOOR
    return out
