"""Issue 4's evidence on the CPU: a 25-page CUAD contract summarized and questioned, and prefix
reuse on documents that fit the context, all through the worker's own code in one process.

    .venv/bin/python bench/cuad_cpu.py [--corpus ../shared/corpus] [--out bench/results]
                                        [--cache-dir /tmp/longdoc-model-cache]

A temporary LONGDOC_DATA_DIR gets a migrated SQLite database; documents go in, and summaries and
answers come out, through worker.jobs (ingest.run_ingest, summary.run_summary, answer.run_answer) with job rows, as a
worker would run them, and the default model (SmolLM2-135M-Instruct) from worker.model.engine_holder.
The model cache dir persists between runs so the GGUF is converted once.

Prefix reuse: two different questions in a row about a document that fits the context, first on
the worker's engine (prefix cache on), then on a second engine built from the same config with
enable_prefix_cache=False (the control: every prompt token computed). Greedy decoding, so the
answers should be the same either way.

Writes bench/results/cuad_cpu.md and .json. Only ids, counts and timings are printed; the
results file quotes the model's short answers and the summary (public SEC filings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CUAD = "legal/cuad_train_01_service_gpaq.pdf"
CUAD_QUESTION = "Which state's law governs this agreement?"
# Documents that fit SmolLM2's 8,192-token context whole (806 and ~6,000 tokens), two questions each.
FITTING = {
    "medical/fda_otc_drug_facts_ibuprofen_2024.pdf": (
        "How many tablets may an adult take in 24 hours at most?",
        "When should the user stop use and ask a doctor?",
    ),
    "legal/court_ca1_calvary_chapel_v_mills_20-1507.pdf": (
        "Who are the parties in this case?",
        "What did the court decide?",
    ),
}


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = {
        line.split(":")[0]: int(line.split()[1]) // 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith(("MemTotal", "MemAvailable"))
    }
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "engine", "pipelines", "worker", "app"],
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "memory_mib": mem,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        **{p: _version(p) for p in ("torch", "transformers", "tokenizers", "pypdf", "bm25s")},
        "git_head": head,
        "uncommitted_changes_in_code": [line[3:] for line in dirty if line.strip()],
    }


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _call_row(call: dict[str, Any]) -> dict[str, Any]:
    keys = ("step", "num_prompt_tokens", "num_cached_tokens", "prefill_seconds")
    row = {k: call.get(k) for k in keys}
    row |= {k: call.get(k) for k in ("num_decode_tokens", "decode_seconds", "finish_reason")}
    row["num_chunks"] = len(call.get("chunk_sizes") or ())
    return row


class Bench:
    def __init__(self, corpus: Path, data_dir: Path, cache_dir: Path) -> None:
        os.environ["LONGDOC_DATA_DIR"] = str(data_dir)
        os.environ["LONGDOC_DATABASE_URL"] = f"sqlite:///{data_dir / 'longdoc.db'}"
        os.environ["LONGDOC_MODEL_CACHE_DIR"] = str(cache_dir)
        os.environ["LONGDOC_ENGINE_DEVICE"] = "cpu"
        from app import migrate
        from worker import resources
        from worker.ingest.store import IngestOptions

        self.corpus = corpus
        self.settings = resources.settings()
        migrate.upgrade(self.settings.database_url)
        self.sessions = resources.sessions()
        self.count_tokens = resources.count_tokens()
        self.options = IngestOptions.from_settings(self.settings)

    def ingest(self, relative: str) -> dict[str, Any]:
        from app.services import file_store, jobs
        from worker.jobs import ingest as runner_ingest
        from worker.jobs import job_run

        path = self.corpus / relative
        with self.sessions() as session:
            stored = file_store.store_file(
                files_dir=self.settings.files_dir,
                content_hash=file_store.content_hash_of(path),
                data=path,
            )
            params = jobs.IngestParams(file_name=path.name, path=str(stored))
            job_id = jobs.create_ingest_job(session=session, params=params).id
            session.commit()
        started = time.perf_counter()
        outcome = runner_ingest.run_ingest(
            job_id, sessions=self.sessions, options=self.options, count_tokens=self.count_tokens
        )
        seconds = time.perf_counter() - started
        job = self._job(job_id)
        if outcome.status != job_run.SUCCEEDED:
            raise SystemExit(f"ingest of {path.name} failed: {job.error_code}: {job.error}")
        return {"file": path.name, "document_id": job.document_id, "seconds": round(seconds, 2)} | {
            k: job.stats[k] for k in ("num_pages", "num_tokens", "num_passages", "kind")
        }

    def _job(self, job_id: int):
        from app.services import jobs

        with self.sessions() as session:
            return jobs.get_job(session=session, job_id=job_id)

    def _run(self, kind, document_id: int, params: dict, run, model_factory, max_new: int):
        from app.services import jobs

        with self.sessions() as session:
            job_id = jobs.create_job(
                session=session, kind=kind, document_id=document_id, params=params
            ).id
            session.commit()
        load = round(os.getloadavg()[0], 2)
        started, cpu_started = time.perf_counter(), time.process_time()
        outcome = run(
            job_id, sessions=self.sessions, model_factory=model_factory, max_new_tokens=max_new
        )
        seconds = round(time.perf_counter() - started, 2)
        job = self._job(job_id)
        if outcome.status != "succeeded":
            raise SystemExit(f"{kind.value} job {job_id} failed: {job.error_code}: {job.error}")
        # CPU seconds of this process: less sensitive than wall time to other processes' load.
        timing = {"seconds": seconds, "cpu_seconds": round(time.process_time() - cpu_started, 2)}
        return job_id, timing | {"load_average_1min_at_start": load}

    def summarize(self, document_id: int, model_factory, max_new: int) -> dict[str, Any]:
        from app.db.models import JobKind
        from app.services import results
        from pipelines.citations import parse_citations
        from worker.jobs import summary as summary_run

        job_id, timing = self._run(
            JobKind.SUMMARIZE, document_id, {}, summary_run.run_summary, model_factory, max_new
        )
        with self.sessions() as session:
            summary = results.get_summary_for_job(session=session, job_id=job_id)
            stats = summary.stats
            return {
                "job_id": job_id,
                **timing,
                "method": summary.method.value,
                "section_pages": stats.get("section_pages"),
                "cited_pages": parse_citations(summary.text),
                "num_calls": stats["num_calls"],
                "num_prompt_tokens": stats["num_prompt_tokens"],
                "num_cached_tokens": stats["num_cached_tokens"],
                "prefill_seconds": round(stats["prefill_seconds"], 2),
                "decode_seconds": round(stats["decode_seconds"], 2),
                "num_decode_tokens": stats["num_decode_tokens"],
                "calls": [_call_row(c) for c in stats["calls"]],
                "text": summary.text,
            }

    def answer(self, document_id: int, question: str, model_factory, max_new: int) -> dict:
        from app.db.models import JobKind
        from app.services import results
        from pipelines.citations import parse_citations
        from worker.jobs import answer as answer_run

        params = {"question": question}
        job_id, timing = self._run(
            JobKind.ANSWER, document_id, params, answer_run.run_answer, model_factory, max_new
        )
        with self.sessions() as session:
            answer = results.get_answer_for_job(session=session, job_id=job_id)
            (call,) = answer.stats["calls"]
            own = answer.answer.split("\n\nSources:")[0]
            return {
                "job_id": job_id,
                "question": question,
                **timing,
                "method": answer.stats["method"],
                "cited_pages": list(answer.cited_pages),
                "model_cited_pages": parse_citations(own),
                "cited_passage_ids": list(answer.cited_passage_ids),
                **_call_row(call),
                "text": answer.answer,
            }

    def label_location(self, document_id: int, label: str, passage_ids: list[int]) -> dict:
        """Where the labelled clause is: its page(s), and whether a given passage holds it."""
        from app.services import documents

        probe = _norm(label)[:60]  # the clause's opening words; page breaks may split the rest
        with self.sessions() as session:
            pages = documents.get_pages(session=session, document_id=document_id)
            passages = documents.get_passages(session=session, document_id=document_id)
            return {
                "label_pages": [p.number for p in pages if probe in _norm(p.text)],
                "label_passage_ids": [p.id for p in passages if probe in _norm(p.text)],
                "label_in_prompt_passages": any(
                    probe in _norm(p.text) for p in passages if p.id in passage_ids
                ),
            }


def _control_factory(settings):
    """The worker's engine config with the prefix cache off: the baseline for reuse."""
    from engine import LLMEngine
    from worker.model.adapter import EngineChatModel
    from worker.model.engine_holder import engine_config
    from worker.model.kernel_build import put_ninja_on_path

    model = None

    def factory():
        nonlocal model
        if model is None:
            config = replace(engine_config(settings), enable_prefix_cache=False)
            put_ninja_on_path()  # as the worker's engine holder does
            model = EngineChatModel(LLMEngine(config), settings.model)
        return model

    return factory


def run(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    from worker.model import engine_holder

    report: dict[str, Any] = {"machine": _machine()}
    cache_was_empty = not any(args.cache_dir.glob("*/*.safetensors"))
    bench = Bench(args.corpus, data_dir, args.cache_dir)
    settings = bench.settings
    docs = {rel: bench.ingest(rel) for rel in (CUAD, *FITTING)}
    report["documents"] = list(docs.values())
    print("ingested:", [(d["file"], d["num_pages"], d["num_tokens"]) for d in docs.values()])

    started = time.perf_counter()
    model = engine_holder.get_chat_model(settings)
    report["engine"] = {
        "build_seconds": round(time.perf_counter() - started, 2),
        "model_cache_was_empty": cache_was_empty,
        "max_context_tokens": model.max_context_tokens,
        "torch_threads": __import__("torch").get_num_threads(),
        "attention_backend": model._engine.attention_backend,
        "kv_cache_tokens": model._engine._main.blocks.num_blocks * settings_block(model),
    }
    print("engine:", report["engine"])

    def factory():
        return engine_holder.get_chat_model(settings)

    cuad = docs[CUAD]
    summary = bench.summarize(cuad["document_id"], factory, args.summary_tokens)
    print("summary:", {k: v for k, v in summary.items() if k not in ("text", "calls")})
    answer = bench.answer(cuad["document_id"], CUAD_QUESTION, factory, args.answer_tokens)
    label = _cuad_label(args.corpus)
    where = bench.label_location(cuad["document_id"], label, answer["cited_passage_ids"])
    state = re.search(r"laws? of the state of (\w+)", label, re.IGNORECASE).group(1)
    answer |= where | {
        "label": label,
        "label_state": state,
        "answer_names_state": state.lower() in answer["text"].lower(),
        "cited_pages_hold_label": bool(set(answer["cited_pages"]) & set(where["label_pages"])),
    }
    print("cuad answer:", {k: v for k, v in answer.items() if k not in ("text", "label")})
    report["cuad"] = {"document": cuad, "summary": summary, "governing_law": answer}

    reuse = []
    for rel, questions in FITTING.items():
        doc = docs[rel]
        warm = [bench.answer(doc["document_id"], q, factory, args.answer_tokens) for q in questions]
        reuse.append({"document": doc, "prefix_cache_on": warm})
    control = _control_factory(settings)
    for entry, questions in zip(reuse, FITTING.values(), strict=True):
        doc_id = entry["document"]["document_id"]
        entry["prefix_cache_off"] = [
            bench.answer(doc_id, q, control, args.answer_tokens) for q in questions
        ]
        for key in ("prefix_cache_on", "prefix_cache_off"):
            print(entry["document"]["file"], key, [_brief(a) for a in entry[key]])
    report["prefix_reuse"] = reuse
    report["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    report["settings"] = {
        "summary_max_new_tokens": args.summary_tokens,
        "answer_max_new_tokens": args.answer_tokens,
        "passage_max_tokens": settings.passage_max_tokens,
        "model": settings.model,
        "device": settings.engine_device,
        "dtype": model._engine.dtype.__str__(),
    }
    return report


def settings_block(model) -> int:
    return model._engine._main.blocks.block_size


def _brief(answer: dict[str, Any]) -> dict[str, Any]:
    keys = ("seconds", "cpu_seconds", "num_prompt_tokens", "num_cached_tokens", "prefill_seconds")
    return {k: answer[k] for k in keys}


def _cuad_label(corpus: Path) -> str:
    name = Path(CUAD).name.removeprefix("cuad_train_")
    entries = json.loads((corpus / "legal" / "cuad_train_metadata.json").read_text())
    (entry,) = [e for e in entries if e["file"] == name]
    return entry["Governing Law"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/longdoc-model-cache"))
    parser.add_argument("--summary-tokens", type=int, default=256)
    parser.add_argument("--answer-tokens", type=int, default=96)
    args = parser.parse_args()
    if not (args.corpus / CUAD).is_file():
        sys.exit(f"No corpus at {args.corpus}: pass --corpus.")
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="longdoc-cuad-") as data_dir:
        report = run(args, Path(data_dir))
    report["total_seconds"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuad_cpu.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"wrote {args.out / 'cuad_cpu.json'} in {report['total_seconds']} s")


if __name__ == "__main__":
    main()
