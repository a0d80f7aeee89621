"""A collection question answered as a table through the model-server client, against the
scripted local server acting as llama.cpp: each document's row is asked for as JSON of the row
schema in llama.cpp's own request shape (found from /v1/models), and the JSON row is stored
once its quote is found verbatim in the document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind
from app.services import collection_answers, collections, jobs
from app.settings import Settings
from pipelines.collection.table_reply import ROW_SCHEMA
from tests.pipelines import pdf_factory
from tests.pipelines.facts_documents import CONTRACT_PAGES
from tests.worker.model.model_server_stub import chunks, stub_server
from worker.ingest.store import IngestOptions
from worker.jobs import collection as runner_collection
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.model import engine_holder

# Words of the governing-law clause as the model quotes them: the PDF breaks the line inside.
QUOTE = "governed by and construed in accordance with the laws of the State of Oregon"


@pytest.fixture
def stub():
    with stub_server() as server:
        yield server


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _table_job(sessions, tmp_path: Path, count_tokens) -> int:
    """A generated contract ingested into a collection; the id of a table question's job."""
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="supply.pdf")
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name},
        )
        session.commit()
    ingest = runner_ingest.run_ingest(
        job.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=96),
        count_tokens=count_tokens,
    )
    assert ingest.status == job_run.SUCCEEDED
    with sessions() as session:
        document_id = session.get(Job, ingest.job_id).document_id
        matter = collections.create_collection(session=session, name="Matter")
        session.flush()
        collections.add_documents(
            session=session, collection_id=matter.id, document_ids=[document_id]
        )
        question = collection_answers.create_question_job(
            session=session,
            collection_id=matter.id,
            question="Which state's law governs each contract?",
            each=True,
        )
        session.commit()
        return question.id


@pytest.mark.parametrize(
    ("quote", "source"),
    [(QUOTE, "model"), ("governed by the laws of the State of Delaware", "quote")],
    ids=["quote-in-document", "made-up-quote"],
)
def test_a_table_row_comes_as_json_in_llamacpps_shape_and_its_quote_is_checked(
    sessions, tmp_path, count_tokens, stub, quote, source
) -> None:
    row = {"answer": "The laws of the State of Oregon govern it.", "page": 1, "quote": quote}
    stub.serve_as("llamacpp", json_reply=chunks(json.dumps(row)))
    stub.replies.append(chunks("Oregon law governs it."))
    job_id = _table_job(sessions, tmp_path, count_tokens)

    engine_holder.reset()
    try:
        settings = Settings(llm_base_url=stub.base_url)
        outcome = runner_collection.run_collection_answer(
            job_id,
            sessions=sessions,
            model_factory=lambda: engine_holder.get_chat_model(settings),
            max_new_tokens=64,
        )
    finally:
        engine_holder.reset()

    assert outcome.status == job_run.SUCCEEDED
    ((_headers, body),) = stub.requests
    assert body["response_format"] == {"type": "json_object", "schema": ROW_SCHEMA}
    assert stub.schemas_read == [ROW_SCHEMA]
    with sessions() as session:
        saved = collection_answers.get_for_job(session=session, job_id=job_id)
        assert saved is not None and saved.mode == "per_document"
        (stored,) = saved.rows
        stats = saved.stats
    assert stats["num_json_replies"] == 1
    assert (stored["source"], stored["page"]) == (source, 3)  # the document's page, not 1
    assert "Oregon" in stored["quote"] and "Delaware" not in stored["quote"] + stored["answer"]
    if source == "model":
        assert stored["answer"] == row["answer"]
        assert " ".join(QUOTE.split()) in " ".join(stored["quote"].split())
    assert stats["num_quotes_not_in_document"] == (source == "quote")
