"""Issue 11's quality benchmark: the real pipeline with the default model on the ten CUAD dev
contracts and the court opinions in ../shared/corpus/legal, scored per field against CUAD's
expert labels (cuad_train_metadata.json), and repeated phrases counted.

    .venv/bin/python bench/quality.py [--only facts|answers|summaries] [--limit N]
        [--corpus ../shared/corpus] [--out bench/results] [--cache-dir /tmp/longdoc-model-cache]

Everything goes through the worker's own job code in one process, as a worker runs it:
worker.jobs.ingest.run_ingest, worker.jobs.runner.run_answer, run_summary and worker.jobs.facts.run_facts on job rows
in a fresh temporary SQLite database, the model from worker.model.engine_holder. So it measures
whatever answer and summary pipeline the checkout has.

Scores (contracts): governing law named with its labelled clause on a cited page, by the
answer to "Which state's or country's law governs this agreement?" and by key facts (where the
label names no jurisdiction, right means naming none); parties (at least two of the labelled
names); agreement and effective date (ISO day; where the label has no date, right means none);
expiration, renewal and notice (the fact quotes the labelled clause). Opinions: the key facts
against values read off each opinion's first and last pages (below), and the repeated-phrase
count (a phrase of 5 words occurring more than twice) of every answer and summary.

Writes bench/results/quality.md and quality.json, with the commit each part ran on. A full
run is long on 2 cores: run parts with --only (the other parts' earlier results are kept,
unless --fresh), or the first N documents with --limit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import _quality_report as report  # noqa: E402
from bench import _quality_scores as scores  # noqa: E402

PARTS = ("facts", "answers", "summaries")
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


class Harness:
    """A temporary LongDoc: SQLite, the worker's sessions, ingest options and model."""

    def __init__(self, data_dir: Path, cache_dir: Path) -> None:
        os.environ["LONGDOC_DATA_DIR"] = str(data_dir)
        os.environ["LONGDOC_DATABASE_URL"] = f"sqlite:///{data_dir / 'longdoc.db'}"
        os.environ["LONGDOC_MODEL_CACHE_DIR"] = str(cache_dir)
        os.environ.setdefault("LONGDOC_ENGINE_DEVICE", "cpu")
        from app import migrate
        from worker import resources
        from worker.ingest.store import IngestOptions

        self.settings = resources.settings()
        migrate.upgrade(self.settings.database_url)
        self.sessions = resources.sessions()
        self.count_tokens = resources.count_tokens()
        self.options = IngestOptions.from_settings(self.settings)
        # As the workers run it: hybrid retrieval with the packaged embedding model.
        self.embedder = resources.embedder()

    def model(self):
        from worker.model import engine_holder

        return engine_holder.get_chat_model(self.settings)

    def warm_up(self) -> float:
        """Start the model as a worker has it after its first job (engine built, kernels
        loaded), so that each job's seconds are its own; returns the start's seconds."""
        started = time.perf_counter()
        self.model().complete([{"role": "user", "content": "Say yes."}], max_new_tokens=2)
        return round(time.perf_counter() - started, 1)

    def _run(self, run, kind, document_id: int, what: str, **kwargs: Any) -> tuple[int, float]:
        """A job of `kind` created and run by `run(job_id, sessions=, model_factory=, **kwargs)`:
        its id and seconds; a failed job ends the benchmark with its sentence."""
        from app.services import jobs

        params = kwargs.pop("params", None)
        with self.sessions() as session:
            job = jobs.create_job(
                session=session, kind=kind, document_id=document_id, params=params
            )
            session.commit()
            job_id = job.id
        started = time.perf_counter()
        outcome = run(job_id, sessions=self.sessions, model_factory=self.model, **kwargs)
        seconds = round(time.perf_counter() - started, 1)
        self._check(outcome, job_id, what)
        return job_id, seconds

    def _check(self, outcome, job_id: int, what: str) -> None:
        from app.services import jobs

        if outcome.status != "succeeded":
            with self.sessions() as session:
                job = jobs.get_job(session=session, job_id=job_id)
                raise SystemExit(f"{what} job {job_id} failed: {job.error_code}: {job.error}")

    def ingest(self, path: Path) -> dict[str, Any]:
        from app.services import documents, jobs
        from worker.jobs import ingest as runner_ingest

        stored = documents.store_file(
            files_dir=self.settings.files_dir,
            content_hash=documents.content_hash_of(path),
            data=path,
        )
        params = jobs.IngestParams(file_name=path.name, path=str(stored))
        with self.sessions() as session:
            job_id = jobs.create_ingest_job(session=session, params=params).id
            session.commit()
        outcome = runner_ingest.run_ingest(
            job_id,
            sessions=self.sessions,
            options=self.options,
            count_tokens=self.count_tokens,
            embedder=self.embedder,
        )
        self._check(outcome, job_id, "ingest")
        with self.sessions() as session:
            job = jobs.get_job(session=session, job_id=job_id)
            pages = documents.get_pages(session=session, document_id=job.document_id)
            return {
                "document_id": job.document_id,
                "num_pages": job.stats["num_pages"],
                "num_tokens": job.stats["num_tokens"],
                "pages": [(p.number, p.text) for p in pages],
            }

    def facts(self, document_id: int) -> dict[str, Any]:
        from app.db.models import JobKind
        from app.services import facts as fact_service
        from app.services import jobs
        from worker.jobs import facts as runner_facts

        job_id, seconds = self._run(runner_facts.run_facts, JobKind.FACTS, document_id, "facts")
        with self.sessions() as session:
            stats = jobs.get_job(session=session, job_id=job_id).stats
            rows = fact_service.list_facts(session=session, document_id=document_id)
            return {
                "seconds": seconds,
                "subkind": stats.get("subkind"),
                "num_prompt_tokens": stats.get("num_prompt_tokens"),
                "num_decode_tokens": stats.get("num_decode_tokens"),
                "facts": {
                    r.field: {
                        "value": r.value,
                        "normalized": r.normalized_value,
                        "page": r.page,
                        "source": r.source.value,
                        "confidence": r.confidence,
                        "quotes": [str(e.get("text", "")) for e in r.evidence],
                    }
                    for r in rows
                },
            }

    def answer(self, document_id: int, question: str, max_new_tokens: int) -> dict[str, Any]:
        from app.db.models import JobKind
        from app.services import results
        from worker.jobs import runner

        job_id, seconds = self._run(
            runner.run_answer,
            JobKind.ANSWER,
            document_id,
            "answer",
            params={"question": question},
            max_new_tokens=max_new_tokens,
            embedder=self.embedder,
        )
        with self.sessions() as session:
            row = results.get_answer_for_job(session=session, job_id=job_id)
            text = row.answer
            return {
                "question": question,
                "seconds": seconds,
                "text": text,
                "cited_pages": list(row.cited_pages),
                "method": (row.stats or {}).get("method"),
                "support": row.support.value if row.support is not None else None,
                "model_text": row.model_answer,
                "quotes": [{"page": q.get("page"), "text": q.get("text")} for q in row.quotes],
                **scores.phrase_repeats(text),
            }

    def summary(self, document_id: int, max_new_tokens: int) -> dict[str, Any]:
        from app.db.models import JobKind
        from app.services import results
        from worker.jobs import runner

        job_id, seconds = self._run(
            runner.run_summary,
            JobKind.SUMMARIZE,
            document_id,
            "summary",
            max_new_tokens=max_new_tokens,
            embedder=self.embedder,
        )
        with self.sessions() as session:
            summary = results.get_summary_for_job(session=session, job_id=job_id)
            rows = summary.sentence_support or []
            lead = [row["text"] for row in summary.lead or []]
            model_supported = [r["text"] for r in rows if r["status"] == "supported"]
            return {
                "seconds": seconds,
                "text": summary.text,
                "method": summary.method.value,
                "lead": lead,
                "sentences": [{"text": r["text"], "status": r["status"]} for r in rows],
                # What the UI and the CLI show as the summary: the lead, then the model's
                # supported sentences (the others are set apart).
                "supported_text": " ".join([*lead, *model_supported]),
                "model_supported_text": " ".join(model_supported),
                **scores.phrase_repeats(summary.text),
            }


def _documents(corpus: Path, limit: int | None) -> list[tuple[Path, dict | None]]:
    legal = corpus / "legal"
    labels = json.loads((legal / "cuad_train_metadata.json").read_text())
    found: list[tuple[Path, dict | None]] = [(legal / f"cuad_train_{e['file']}", e) for e in labels]
    found += [(legal / name, None) for name in OPINIONS]
    return found[:limit] if limit else found


def run(args: argparse.Namespace, data_dir: Path) -> tuple[list[dict[str, Any]], float]:
    """Every document's results, and the seconds the model took to start."""
    from pipelines.documents import PageText

    harness = Harness(data_dir, args.cache_dir)
    engine_start_s = harness.warm_up()
    parts = args.only or list(PARTS)
    results: list[dict[str, Any]] = []
    for path, label in _documents(args.corpus, args.limit):
        if args.match and args.match not in path.name:
            continue
        entry: dict[str, Any] = {"file": path.name, "labels": label}
        ingested = harness.ingest(path)
        entry.update({k: v for k, v in ingested.items() if k != "pages"})
        if label:
            pages = [PageText(number, text) for number, text in ingested["pages"]]
            entry["law_pages"] = report.law_pages(label, pages)
        questions = CONTRACT_QUESTIONS.values() if label else (OPINION_QUESTION,)
        if "answers" in parts and "facts" in parts:
            # As a user asking right after the upload, before the key-facts job has run.
            entry["answers_before_facts"] = [
                harness.answer(ingested["document_id"], q, args.answer_tokens) for q in questions
            ]
        if "facts" in parts:
            entry["facts"] = harness.facts(ingested["document_id"])
        if "answers" in parts:
            entry["answers"] = [
                harness.answer(ingested["document_id"], q, args.answer_tokens) for q in questions
            ]
        if "summaries" in parts:
            entry["summary"] = harness.summary(ingested["document_id"], args.summary_tokens)
        entry["scores"] = report.score_document(entry, OPINIONS.get(path.name))
        results.append(entry)
        print(path.name, json.dumps(entry["scores"]), flush=True)
    return results, engine_start_s


def _merged(previous: dict[str, Any], documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The earlier run's documents with this run's parts put in (a document by its file)."""
    by_file = {d["file"]: d for d in previous.get("documents", [])}
    for document in documents:
        old = by_file.setdefault(document["file"], {})
        old.update({k: v for k, v in document.items() if k != "scores"})
    merged = list(by_file.values())
    for document in merged:
        document["scores"] = report.score_document(document, OPINIONS.get(document["file"]))
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", choices=PARTS, action="append", help="this part only (repeat for several)"
    )
    parser.add_argument("--limit", type=int, help="only the first N documents")
    parser.add_argument(
        "--match", help="only the documents whose file name holds this text (e.g. court_)"
    )
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/longdoc-model-cache"))
    parser.add_argument("--answer-tokens", type=int, default=96)
    parser.add_argument("--summary-tokens", type=int, default=256)
    parser.add_argument(
        "--fresh", action="store_true", help="with --only: drop the other parts' earlier results"
    )
    args = parser.parse_args()
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
    args.out.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    (args.out / "quality.md").write_text(report.markdown(result))
    print(f"wrote {args.out / 'quality.md'} in {this_run['total_seconds']} s")


if __name__ == "__main__":
    main()
