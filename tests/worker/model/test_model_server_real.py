"""Every model job through a real OpenAI-compatible server that is not ours: `transformers serve`
(it comes with transformers) serving the default model from its local converted folder, offline,
on the CPU. A generated contract is ingested, then its key facts, a question, its summary and a
collection question run through the worker's job code with LONGDOC_LLM_BASE_URL set."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import FactSource, Job, JobKind, JobStatus
from app.services import collection_answers, collections, jobs, results
from app.services import facts as fact_service
from app.settings import Settings
from engine.gguf_convert import convert_gguf
from tests.pipelines import pdf_factory
from tests.pipelines.facts_documents import CONTRACT_PAGES
from tests.worker import celery_support
from tests.worker.model.real_server import free_port, real_server
from worker.ingest.store import IngestOptions
from worker.jobs import answer as answer_run
from worker.jobs import collection as runner_collection
from worker.jobs import facts as runner_facts
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import summary as summary_run
from worker.model import engine_holder
from worker.model.adapter import PRIORITY_BATCH, PRIORITY_INTERACTIVE

pytest.importorskip("fastapi", reason="transformers serve needs FastAPI (the dev extra has it)")
pytestmark = pytest.mark.slow
MAX_NEW_TOKENS = 12


@pytest.fixture(scope="module")
def served(converted_model_cache: Path) -> Iterator[tuple[str, str]]:
    """(base URL, model name) of `transformers serve` on a free port, stopped at the end."""
    folder = convert_gguf(celery_support.default_gguf(), converted_model_cache)
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [
        str(Path(sys.executable).parent / "transformers"), "serve", str(folder),
        "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "warning",
    ]  # fmt: skip
    # /health: its /v1/models would list every model of the Hugging Face cache.
    with real_server(
        "transformers serve",
        command,
        port=port,
        log_path=converted_model_cache.parent / f"transformers-serve-{port}.log",
        ready_path="/health",
        env=env,
    ) as server:
        yield f"{server.url}/v1", str(folder)


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _model_factory(settings: Settings, priority: int):
    # As worker/tasks.py builds it: the process's model for one task.
    return lambda: engine_holder.get_chat_model(
        settings, priority=priority, time_limit_s=settings.model_time_limit_s
    )


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_key_facts_a_question_a_summary_and_a_collection_question_through_the_server(
    served, sessions, tmp_path, count_tokens
) -> None:
    base_url, model_name = served
    settings = Settings(llm_base_url=base_url, llm_model=model_name, llm_concurrency=4)
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="supply.pdf")
    with sessions() as session:
        ingest_job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name, "then_facts": True},
        )
        session.commit()
    ingest = runner_ingest.run_ingest(
        ingest_job.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=96),
        count_tokens=count_tokens,
    )
    assert ingest.status == job_run.SUCCEEDED and ingest.facts_job_id is not None
    with sessions() as session:
        document_id = session.get(Job, ingest.facts_job_id).document_id
        answer_job = jobs.create_job(
            session=session,
            kind=JobKind.ANSWER,
            document_id=document_id,
            params={"question": "Which state's law governs this agreement?"},
        )
        summary_job = jobs.create_job(
            session=session, kind=JobKind.SUMMARIZE, document_id=document_id
        )
        matter = collections.create_collection(session=session, name="Matter")
        session.flush()
        collections.add_documents(
            session=session, collection_id=matter.id, document_ids=[document_id]
        )
        collection_job = collection_answers.create_question_job(
            session=session, collection_id=matter.id, question="Which law governs?"
        )
        session.commit()

    engine_holder.reset()
    try:
        facts = runner_facts.run_facts(
            ingest.facts_job_id,
            sessions=sessions,
            model_factory=_model_factory(settings, PRIORITY_BATCH),
        )
        answer = answer_run.run_answer(
            answer_job.id,
            sessions=sessions,
            model_factory=_model_factory(settings, PRIORITY_INTERACTIVE),
            max_new_tokens=MAX_NEW_TOKENS,
        )
        summary = summary_run.run_summary(
            summary_job.id,
            sessions=sessions,
            model_factory=_model_factory(settings, PRIORITY_BATCH),
            max_new_tokens=MAX_NEW_TOKENS,
        )
        asked = runner_collection.run_collection_answer(
            collection_job.id,
            sessions=sessions,
            model_factory=_model_factory(settings, PRIORITY_INTERACTIVE),
            max_new_tokens=MAX_NEW_TOKENS,
        )
    finally:
        engine_holder.reset()

    with sessions() as session:
        for outcome in (facts, answer, summary, asked):
            job = session.get(Job, outcome.job_id)
            assert (outcome.status, job.status) == (job_run.SUCCEEDED, JobStatus.SUCCEEDED), (
                job.kind,
                job.error,
            )
        rows = fact_service.list_facts(session=session, document_id=document_id)
        assert rows and {row.model for row in rows if row.source == FactSource.MODEL} <= {
            model_name
        }
        stored_answer = results.get_answer_for_job(session=session, job_id=answer.job_id)
        assert stored_answer is not None and stored_answer.model == model_name
        stored = results.get_summary_for_job(session=session, job_id=summary.job_id)
        assert stored is not None and stored.text.strip()
        calls = stored.stats["calls"]
        # Token counts came from the server's usage, within the limit asked for.
        assert calls and all(call["backend"] == "openai" for call in calls)
        assert all(call["tokens_counted_by"] == "server" for call in calls)
        assert all(0 < call["num_decode_tokens"] <= MAX_NEW_TOKENS for call in calls)
        summary_stats = session.get(Job, summary.job_id).stats
        assert summary_stats["model"] == model_name
        reasons = summary_stats["finish_reasons"]
        assert set(reasons) <= {"stop", "length"}
        assert summary_stats["num_cut_by_length"] == reasons.count("length")
