"""The quality benchmark of issues 11 and 21: the real pipeline with the default model on the
dev set in ../shared/corpus (ten CUAD contracts, three court opinions, three drug labels),
scored against CUAD's expert labels and our own (bench/quality_questions.json).

    .venv/bin/python bench/quality.py [--only facts|answers|summaries|questions] [--limit N]
        [--match TEXT] [--show-answers] [--corpus ../shared/corpus] [--out bench/results]
        [--cache-dir /tmp/longdoc-model-cache]
    .venv/bin/python bench/quality.py --self-test    # the scorer and the labels, no model
    .venv/bin/python bench/quality.py --report-only  # quality.md again from quality.json

Everything goes through the worker's own job code in one process, as a worker runs it:
worker.jobs.ingest.run_ingest, worker.jobs.answer.run_answer, worker.jobs.summary.run_summary and
worker.jobs.facts.run_facts on job rows in a fresh temporary SQLite database, the model from
worker.model.engine_holder (bench/_quality_harness.py). So it measures whatever answer and
summary pipeline the checkout has.

Issue 11 (contracts and opinions): governing law named with its labelled clause on a cited
page, by the answer to "Which state's or country's law governs this agreement?" and by key
facts (where the label names no jurisdiction, right means naming none); parties (at least two
of the labelled names); agreement and effective date (ISO day; where the label has no date,
right means none); expiration, renewal and notice (the fact quotes the labelled clause).
Opinions: the key facts against values read off each opinion's first and last pages (below),
and the repeated-phrase count (a phrase of 5 words occurring more than twice) of every answer
and summary.

Issue 21 (all sixteen documents): the questions part asks each document's labelled questions
after its key-facts job and judges each answer as shown (bench/_answer_scoring.py): right,
partial, wrong, missed or abstained, with its support status; the key facts of opinions, labels
and contracts against the labels' key_facts; every summary checked for prompt text
(bench/_prompt_echo.py). quality.json keeps per question its id, kind, status and verdict, no
answer text; --show-answers prints the answers on the terminal only.

Writes bench/results/quality.md and quality.json, with the commit each part ran on. A full
run is long on 2 cores: run parts with --only (the other parts' earlier results are kept,
unless --fresh), the documents whose name holds --match, or the first N with --limit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import _labelled_report as labelled_report  # noqa: E402
from bench import _labelled_scores as labelled  # noqa: E402
from bench import _quality_report as report  # noqa: E402
from bench._prompt_echo import prompt_phrases  # noqa: E402
from bench._quality_harness import Harness  # noqa: E402
from bench._question_labels import load_labels  # noqa: E402

PARTS = ("facts", "answers", "summaries", "questions")
LABELS = {labels.file: labels for labels in load_labels()}
PROMPT_PHRASES = prompt_phrases()
CONTRACT_QUESTIONS = report.CONTRACT_QUESTIONS
OPINION_QUESTION = "Who are the parties and what did the court decide?"
# Read off the opinions' first and last pages by a person (there are no labels for them).
OPINIONS = {
    "court_ca1_calvary_chapel_v_mills_20-1507.pdf": {
        "court": "United States Court of Appeals For the First Circuit",
        "docket_number": "No. 20-1507",
        "decision_date": "2020-12-22",
        "disposition": "dismissed",
        "case_parties": "CALVARY CHAPEL OF BANGOR v. JANET T. MILLS",
    },
    "court_nc_supreme_2022-NCSC-1.pdf": {
        "court": "SUPREME COURT OF NORTH CAROLINA",
        "docket_number": "No. 363A14-4",
        "decision_date": "2022-02-11",
        "disposition": "modified and affirmed",
        "case_parties": "GIFT SURPLUS, LLC, and SANDHILL AMUSEMENTS, INC. v. STATE OF NORTH CAROLINA",
    },
    "court_scotus_slip_opinion_OT2012.pdf": {
        "court": "SUPREME COURT OF THE UNITED STATES",
        "docket_number": "No. 11-889",
        "decision_date": "2013-06-13",
        "disposition": "affirmed",
        "case_parties": "TARRANT REGIONAL WATER DISTRICT v. HERRMANN",
    },
}


def _git_head() -> dict[str, Any]:
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "pipelines", "worker", "app", "engine"],
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    return {"commit": head, "uncommitted": [line[3:] for line in dirty if line.strip()]}


def _documents(
    corpus: Path, match: list[str] | None, limit: int | None
) -> list[tuple[Path, dict | None]]:
    """The CUAD contracts (with their labels), the opinions, then the drug labels that
    bench/quality_questions.json holds; those whose name holds a `match`, the first `limit`."""
    legal = corpus / "legal"
    labels = json.loads((legal / "cuad_train_metadata.json").read_text())
    found: list[tuple[Path, dict | None]] = [(legal / f"cuad_train_{e['file']}", e) for e in labels]
    found += [(legal / name, None) for name in OPINIONS]
    found += [(corpus / d.folder / d.file, None) for d in LABELS.values() if d.genre == "label"]
    found = [(p, label) for p, label in found if not match or any(m in p.name for m in match)]
    return found[:limit] if limit else found


def _scores(entry: dict[str, Any]) -> dict[str, Any]:
    """Issue 11's scores of the entry, with issue 21's key facts and prompt-text checks."""
    result = report.score_document(entry, OPINIONS.get(entry["file"]))
    labels = LABELS.get(entry["file"])
    if labels and "facts" in entry:
        result["labelled_facts"] = labelled.fact_outcomes(entry["facts"]["facts"], labels)
    if "summary" in entry:
        result["prompt_echo"] = labelled.echo_scores(entry, PROMPT_PHRASES)
    return result


def _ask_labelled(harness: Harness, document_id: int, file: str, args) -> list[dict[str, Any]]:
    """Every labelled question of `file` asked and judged: records without any text."""
    records = []
    for question in LABELS[file].questions:
        answer = harness.answer(document_id, question.question, args.answer_tokens)
        record = labelled.question_record(question, answer, PROMPT_PHRASES)
        records.append(record)
        if args.show_answers:  # on this terminal only, never in the results
            print(
                f"  {record['id']} {record['kind']}: {record['outcome']} "
                f"({record['why']}; {record['status']}) | {' '.join(answer['text'].split())}"
            )
    return records


def run(args: argparse.Namespace, data_dir: Path) -> tuple[list[dict[str, Any]], float]:
    """Every document's results, and the seconds the model took to start."""
    from pipelines.documents import PageText

    harness = Harness(data_dir, args.cache_dir)
    engine_start_s = harness.warm_up()
    parts = args.only or list(PARTS)
    results: list[dict[str, Any]] = []
    for path, label in _documents(args.corpus, args.match, args.limit):
        asks = "answers" in parts and (label is not None or path.name in OPINIONS)
        labelled_questions = "questions" in parts and path.name in LABELS
        if not (asks or labelled_questions or {"facts", "summaries"} & set(parts)):
            continue  # nothing of the parts asked for applies to this document
        entry: dict[str, Any] = {"file": path.name, "labels": label}
        ingested = harness.ingest(path)
        document_id = ingested["document_id"]
        entry.update({k: v for k, v in ingested.items() if k != "pages"})
        if label:
            pages = [PageText(number, text) for number, text in ingested["pages"]]
            entry["law_pages"] = report.law_pages(label, pages)
        questions = CONTRACT_QUESTIONS.values() if label else (OPINION_QUESTION,)
        if asks and "facts" in parts:
            # As a user asking right after the upload, before the key-facts job has run.
            entry["answers_before_facts"] = [
                harness.answer(document_id, q, args.answer_tokens) for q in questions
            ]
        if "facts" in parts:
            entry["facts"] = harness.facts(document_id)
        if labelled_questions:
            if "facts" not in parts:
                harness.facts(document_id)  # a running worker has the facts by then
            entry["questions"] = _ask_labelled(harness, document_id, path.name, args)
        if asks:
            entry["answers"] = [
                harness.answer(document_id, q, args.answer_tokens) for q in questions
            ]
        if "summaries" in parts:
            entry["summary"] = harness.summary(document_id, args.summary_tokens)
        entry["scores"] = _scores(entry)
        results.append(entry)
        asked = Counter(r["outcome"] for r in entry.get("questions", []))
        print(path.name, json.dumps(entry["scores"]), dict(asked) or "", flush=True)
    return results, engine_start_s


def _merged(previous: dict[str, Any], documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The earlier run's documents with this run's parts put in (a document by its file)."""
    by_file = {d["file"]: d for d in previous.get("documents", [])}
    for document in documents:
        old = by_file.setdefault(document["file"], {})
        old.update({k: v for k, v in document.items() if k != "scores"})
    merged = list(by_file.values())
    for document in merged:
        document["scores"] = _scores(document)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", choices=PARTS, action="append", help="this part only (repeat for several)"
    )
    parser.add_argument("--limit", type=int, help="only the first N documents")
    parser.add_argument(
        "--match",
        action="append",
        help="only the documents whose file name holds this text (e.g. court_; repeat for several)",
    )
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/longdoc-model-cache"))
    parser.add_argument("--answer-tokens", type=int, default=96)
    parser.add_argument("--summary-tokens", type=int, default=256)
    parser.add_argument(
        "--fresh", action="store_true", help="with --only: drop the other parts' earlier results"
    )
    parser.add_argument(
        "--show-answers",
        action="store_true",
        help="print each labelled question's answer and verdict here (never stored)",
    )
    parser.add_argument(
        "--self-test", action="store_true", help="check the scorer and the labels; no model"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="score the stored quality.json again and rewrite quality.md; no model",
    )
    args = parser.parse_args()
    if args.self_test:
        from bench import _quality_selftest

        sys.exit(_quality_selftest.main())
    if args.report_only:
        _write(args.out, json.loads((args.out / "quality.json").read_text()), rescore=True)
        print(f"wrote {args.out / 'quality.md'} from the stored results")
        return
    if not (args.corpus / "legal" / "cuad_train_metadata.json").is_file():
        sys.exit(f"No CUAD dev set at {args.corpus / 'legal'}: pass --corpus.")
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    git = _git_head()  # the code that runs: taken before, as commits may land meanwhile
    with tempfile.TemporaryDirectory(prefix="longdoc-quality-") as data_dir:
        documents, engine_start_s = run(args, Path(data_dir))
    this_run = {
        "git": git,
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "cpu_count": os.cpu_count(),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "total_seconds": round(time.perf_counter() - started, 1),
        "engine_start_s": engine_start_s,
        "settings": {"limit": args.limit, "match": args.match}
        | (
            {"answer_max_new_tokens": args.answer_tokens}
            if not args.only or "answers" in args.only
            else {}
        )
        | (
            {"summary_max_new_tokens": args.summary_tokens}
            if not args.only or "summaries" in args.only
            else {}
        ),
    }
    out_json = args.out / "quality.json"
    previous: dict[str, Any] = {}
    if args.only and not args.fresh and out_json.is_file():
        previous = json.loads(out_json.read_text())  # other parts' results are kept
    parts = args.only or list(PARTS)
    result = {
        "runs": {**previous.get("runs", {}), **{part: this_run for part in parts}},
        "documents": _merged(previous, documents) if previous else documents,
    }
    _write(args.out, result)
    print(f"wrote {args.out / 'quality.md'} in {this_run['total_seconds']} s")


def _write(out: Path, result: dict[str, Any], *, rescore: bool = False) -> None:
    """quality.json and quality.md; `rescore`: the stored documents scored again first (the
    labels or the scoring changed; the verdicts on labelled questions are kept as stored)."""
    if rescore:
        for document in result["documents"]:
            document["scores"] = _scores(document)
    out.mkdir(parents=True, exist_ok=True)
    (out / "quality.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    sections = labelled_report.markdown_sections(result["documents"], LABELS)
    (out / "quality.md").write_text(report.markdown(result) + "\n".join(sections))


if __name__ == "__main__":
    main()
