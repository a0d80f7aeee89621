"""bench/quality.py's harness: a temporary LongDoc (SQLite, the worker's sessions, ingest
options and model) that runs the worker's own jobs on a document and returns what they stored.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench import _quality_scores as scores


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
        from app.services import documents, file_store, jobs
        from worker.jobs import ingest as runner_ingest

        stored = file_store.store_file(
            files_dir=self.settings.files_dir,
            content_hash=file_store.content_hash_of(path),
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
        from worker.jobs import answer as answer_run

        job_id, seconds = self._run(
            answer_run.run_answer,
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
        from worker.jobs import summary as summary_run

        job_id, seconds = self._run(
            summary_run.run_summary,
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
