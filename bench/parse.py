"""Parse and split speed over the shared corpus, in pages per second.

    .venv/bin/python bench/parse.py [--corpus ../shared/corpus] [--out bench/results]

Parsing runs in this process (pypdf's own speed) and, for a sample, through the child process that
ingestion uses (adds its start-up cost); splitting uses the default model's real tokenizer.
Writes bench/results/parse.md and parse.json. Document text is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.errors import DocumentError  # noqa: E402
from pipelines.ingest.limits import ParseLimits  # noqa: E402
from pipelines.ingest.parse import parse_pdf, parse_pdf_in_process  # noqa: E402
from pipelines.ingest.split import split_into_passages  # noqa: E402
from worker.model.source import find_default_gguf  # noqa: E402
from worker.model.tokens import token_counter_for  # noqa: E402

FOLDERS = ("legal", "medical", "edge", "edge_extra")
NUM_CHILD_SAMPLES = 8


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--max-tokens", type=int, default=384)
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"No corpus at {args.corpus}: pass --corpus.")

    with tempfile.TemporaryDirectory() as cache:
        count_tokens = token_counter_for(find_default_gguf(), Path(cache))
        rows, refused = [], 0
        files = sorted(p for name in FOLDERS for p in (args.corpus / name).glob("*.pdf"))
        for path in files:
            started = time.perf_counter()
            try:
                parsed = parse_pdf_in_process(path, limits=ParseLimits())
            except DocumentError:
                refused += 1
                continue
            parsed_at = time.perf_counter()
            passages = split_into_passages(
                parsed.pages, count_tokens=count_tokens, max_tokens=args.max_tokens
            )
            done = time.perf_counter()
            rows.append(
                {
                    "file": f"{path.parent.name}/{path.name}",
                    "pages": parsed.num_pages,
                    "chars": parsed.num_chars,
                    "passages": len(passages),
                    "parse_s": parsed_at - started,
                    "split_s": done - parsed_at,
                }
            )
            print(f"{rows[-1]['file']}: {parsed.num_pages} pages", file=sys.stderr)

        sample = sorted(rows, key=lambda r: -r["pages"])[:NUM_CHILD_SAMPLES]
        child_overheads = []
        for row in sample:
            started = time.perf_counter()
            parse_pdf(args.corpus / row["file"], limits=ParseLimits())
            child_overheads.append(time.perf_counter() - started - row["parse_s"])

    pages = sum(r["pages"] for r in rows)
    chars = sum(r["chars"] for r in rows)
    parse_s = sum(r["parse_s"] for r in rows)
    split_s = sum(r["split_s"] for r in rows)
    result = {
        "machine": {
            "cpu": _cpu_name(),
            "cores": _num_cores(),
            "python": platform.python_version(),
            "load_average_1min": round(os.getloadavg()[0], 2),
        },
        "versions": {name: version(name) for name in ("pypdf", "nupunkt", "tokenizers")},
        "num_files_parsed": len(rows),
        "num_files_refused": refused,
        "num_pages": pages,
        "num_chars": chars,
        "parse_pages_per_s": pages / parse_s,
        "split_pages_per_s": pages / split_s,
        "parse_and_split_pages_per_s": pages / (parse_s + split_s),
        "split_chars_per_s": chars / split_s,
        "child_overhead_s_median": statistics.median(child_overheads) if child_overheads else None,
        "files": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "parse.json").write_text(json.dumps(result, indent=2))
    (args.out / "parse.md").write_text(_markdown(result))
    print(_markdown(result))


def _num_cores() -> int:
    return len(os.sched_getaffinity(0))


def _markdown(r: dict) -> str:
    m = r["machine"]
    slowest = sorted(r["files"], key=lambda f: -(f["parse_s"] + f["split_s"]))[:5]
    lines = [
        "# Parse and split speed over the shared corpus",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores (1-minute load {m['load_average_1min']} at the "
        f"end of the run), Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        + ". One process, one file at a time. Produced by `bench/parse.py`.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| files parsed / refused | {r['num_files_parsed']} / {r['num_files_refused']} |",
        f"| pages, characters | {r['num_pages']:,}, {r['num_chars']:,} |",
        f"| parse (pypdf + cleaning), pages/s | {r['parse_pages_per_s']:.1f} |",
        f"| split (sentences + passages + tokenizer), pages/s | {r['split_pages_per_s']:.1f} |",
        f"| parse and split, pages/s | {r['parse_and_split_pages_per_s']:.1f} |",
        f"| split, characters/s | {r['split_chars_per_s']:,.0f} |",
        f"| child-process overhead per file (median of the largest files), s | "
        f"{r['child_overhead_s_median']:.2f} |",
        "",
        "Slowest files (parse + split seconds):",
        "",
        "| file | pages | parse s | split s |",
        "|---|---|---|---|",
        *[
            f"| {f['file']} | {f['pages']} | {f['parse_s']:.2f} | {f['split_s']:.2f} |"
            for f in slowest
        ],
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
