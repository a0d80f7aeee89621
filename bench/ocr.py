"""OCR speed and accuracy on this CPU, and the corpus ingest time with and without OCR.

    .venv/bin/python bench/ocr.py [--corpus ../shared/corpus] [--out bench/results] [--pages 4]

1. Pages of known text are drawn by Pillow at 300 dpi (12 pt DejaVu Sans, specks and a slight
   blur, as a scanner gives), put in a PDF, rendered by pdfium at each DPI and read by RapidOCR
   (pipelines/ingest/ocr.py, 2 onnxruntime threads): pages per second (render + OCR) and the share of
   characters read right, per DPI. One page turned a quarter turn is timed too.
2. Every corpus PDF is ingested (parse child, split, store in a fresh SQLite database; no
   embeddings) with OCR on and with it off: total seconds, files stored, pages OCR'd.
3. Tesseract is compared when `tesseract` is on the PATH; otherwise the report says it is absent.

Writes bench/results/ocr.md and ocr.json. Document text is never printed. The load average is
recorded at the start and the end: on a shared machine the figures are upper bounds on time.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pipelines import scan_factory  # noqa: E402

DPIS = (150, 200, 300)
CHOSEN_DPI = 200
FOLDERS = ("legal", "medical", "edge", "edge_extra")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _accuracy(expected: str, got: str) -> float:
    expected, got = " ".join(expected.split()), " ".join(got.split())
    matcher = difflib.SequenceMatcher(None, expected, got, autojunk=False)
    return sum(b.size for b in matcher.get_matching_blocks()) / len(expected)


def ocr_speed(num_pages: int, directory: Path) -> dict:
    import pypdfium2

    from pipelines.ingest.ocr import PageReader
    from pipelines.ingest.pdf_render import render_page

    images = [scan_factory.scan_image(seed=seed) for seed in range(num_pages)]
    path = scan_factory.scan_pdf(directory, [*images, scan_factory.scan_image(rotation=90)])
    started = time.perf_counter()
    reader = PageReader(num_threads=2)
    load_s = time.perf_counter() - started
    pdf = pypdfium2.PdfDocument(str(path))
    rows = []
    try:
        reader.read(render_page(pdf[0], dpi=CHOSEN_DPI))  # warm-up, not timed
        for dpi in DPIS:
            seconds, accuracies = [], []
            for index in range(num_pages):
                started = time.perf_counter()
                reading = reader.read(render_page(pdf[index], dpi=dpi))
                seconds.append(time.perf_counter() - started)
                accuracies.append(_accuracy(scan_factory.SCAN_TEXT, reading.text))
            rows.append(
                {
                    "dpi": dpi,
                    "pages": num_pages,
                    "pages_per_second": num_pages / sum(seconds),
                    "seconds_per_page": sum(seconds) / num_pages,
                    "min_char_accuracy": min(accuracies),
                }
            )
        started = time.perf_counter()
        turned = reader.read(render_page(pdf[num_pages], dpi=CHOSEN_DPI))
        turned_s = time.perf_counter() - started
    finally:
        pdf.close()
    return {
        "model_load_seconds": load_s,
        "by_dpi": rows,
        "quarter_turn_seconds": turned_s,
        "quarter_turn_accuracy": _accuracy(scan_factory.SCAN_TEXT, turned.text),
    }


def tesseract(directory: Path) -> dict | None:
    if shutil.which("tesseract") is None:
        return None
    import subprocess

    image = directory / "page.png"
    scan_factory.scan_image().save(image)
    started = time.perf_counter()
    run = subprocess.run(
        ["tesseract", str(image), "stdout"], capture_output=True, text=True, check=False
    )
    return {
        "seconds_per_page": time.perf_counter() - started,
        "char_accuracy": _accuracy(scan_factory.SCAN_TEXT, run.stdout),
    }


def corpus_ingest(corpus: Path, *, ocr: bool) -> dict:
    from app import migrate
    from app.db.session import make_engine, session_factory
    from pipelines.ingest.limits import ParseLimits
    from pipelines.ingest.page_sources import SourceOptions
    from worker.ingest.store import STORED, IngestOptions
    from worker.jobs.ingest import ingest_file
    from worker.model.source import find_default_gguf
    from worker.model.tokens import token_counter_for

    files = sorted(p for name in FOLDERS for p in (corpus / name).glob("*.pdf"))
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{scratch}/bench.db"
        migrate.upgrade(url)
        engine = make_engine(url)
        sessions = session_factory(engine)
        count_tokens = token_counter_for(find_default_gguf(), Path(scratch) / "models")
        limits = ParseLimits(sources=replace(SourceOptions(), ocr_enabled=ocr))
        options = IngestOptions(files_dir=Path(scratch) / "files", limits=limits)
        started = time.perf_counter()
        outcomes = [
            ingest_file(path, sessions=sessions, options=options, count_tokens=count_tokens)
            for path in files
        ]
        seconds = time.perf_counter() - started
        engine.dispose()
    stored = [o for o in outcomes if o.status == STORED]
    return {
        "ocr": ocr,
        "files": len(files),
        "stored": len(stored),
        "pages_stored": sum(o.num_pages for o in stored),
        "ocr_pages": sum(o.num_ocr_pages for o in stored),
        "files_with_hidden_text": sum(1 for o in stored if o.num_redactions),
        "seconds": seconds,
        "child_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def report(results: dict) -> str:
    speed = results["speed"]
    lines = [
        "# OCR on this CPU, and the corpus ingest with and without it",
        "",
        f"Machine: {results['cpu']}, {os.cpu_count()} cores, SHARED with other sessions' work "
        f"while this ran (1/5/15-minute load average {results['load_start']} at the start, "
        f"{results['load_end']} at the end, on 2 cores): the times are upper bounds, and vary "
        "run to run by a factor of two or more. RapidOCR "
        f"{results['versions']['rapidocr']} (PP-OCRv6 small detection and recognition, the "
        f"models in its wheel) on onnxruntime {results['versions']['onnxruntime']}, 2 threads; "
        f"pypdfium2 {results['versions']['pypdfium2']}. Produced by `bench/ocr.py`.",
        "",
        "## Pages per second (render + OCR), one page at a time",
        "",
        f"Generated pages of known text (12 pt, drawn at 300 dpi with specks and blur), "
        f"{speed['by_dpi'][0]['pages']} per DPI after one warm-up page; models loaded in "
        f"{speed['model_load_seconds']:.1f} s once per parse child.",
        "",
        "| DPI | pages/s | s/page | lowest character accuracy |",
        "|---|---|---|---|",
    ]
    for row in speed["by_dpi"]:
        chosen = " (chosen)" if row["dpi"] == CHOSEN_DPI else ""
        lines.append(
            f"| {row['dpi']}{chosen} | {row['pages_per_second']:.2f} | "
            f"{row['seconds_per_page']:.1f} | {row['min_char_accuracy']:.1%} |"
        )
    lines += [
        "",
        f"A page scanned a quarter turn ({CHOSEN_DPI} dpi): {speed['quarter_turn_seconds']:.1f} s "
        f"(read twice: once to see the boxes are tall, once turned), "
        f"{speed['quarter_turn_accuracy']:.1%} of characters right.",
        "",
        "## The corpus, ingested with OCR on and off",
        "",
        "Every PDF of the corpus, one at a time: the parse child, splitting with the default "
        "model's tokenizer, storing in a fresh SQLite database; no embeddings.",
        "",
        "| OCR | files | stored | pages stored | pages OCR'd | with hidden text | seconds | "
        "parse child peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in results["corpus"]:
        lines.append(
            f"| {'on' if row['ocr'] else 'off'} | {row['files']} | {row['stored']} | "
            f"{row['pages_stored']} | {row['ocr_pages']} | {row['files_with_hidden_text']} | "
            f"{row['seconds']:.0f} | {row['child_peak_rss_mb']:.0f} |"
        )
    tess = results["tesseract"]
    lines += [
        "",
        "## Tesseract",
        "",
        "`tesseract` is not installed on this machine (`which tesseract` finds nothing), so it "
        "was not compared; the wheel-only RapidOCR path is the default and the only one."
        if tess is None
        else f"Tesseract on the same page: {tess['seconds_per_page']:.1f} s, "
        f"{tess['char_accuracy']:.1%} of characters right.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--no-corpus", action="store_true")
    parser.add_argument(
        "--reuse-speed", action="store_true", help="keep part 1 from ocr.json; run the corpus"
    )
    args = parser.parse_args()
    from importlib.metadata import version

    from bench.parse import _cpu_name

    results: dict = {
        "cpu": _cpu_name(),
        "load_start": _load(),
        "versions": {p: version(p) for p in ("rapidocr", "onnxruntime", "pypdfium2")},
    }
    if args.reuse_speed:
        earlier = json.loads((args.out / "ocr.json").read_text())
        results["speed"], results["tesseract"] = earlier["speed"], earlier["tesseract"]
        results["load_start"] = earlier["load_start"]
    else:
        with tempfile.TemporaryDirectory() as scratch:
            results["speed"] = ocr_speed(args.pages, Path(scratch))
            results["tesseract"] = tesseract(Path(scratch))
    results["corpus"] = (
        []
        if args.no_corpus or not args.corpus.is_dir()
        else [corpus_ingest(args.corpus, ocr=False), corpus_ingest(args.corpus, ocr=True)]
    )
    results["load_end"] = _load()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ocr.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "ocr.md").write_text(report(results))
    print(f"wrote {args.out / 'ocr.md'}")


if __name__ == "__main__":
    main()
