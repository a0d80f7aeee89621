"""The key-facts job through the model-server client against the scripted local server: every
field asks for JSON by the answer schema (`response_format` json_schema), a JSON reply is read,
and a reply that does not match is asked for once more, then parsed as plain text; a server
that never answers in JSON is asked in plain text after a few fields."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind
from app.services import facts as fact_service
from app.services import jobs
from app.settings import Settings
from pipelines.facts.prompts import ANSWER_SCHEMA
from tests.pipelines import pdf_factory
from tests.pipelines.facts_documents import CONTRACT_PAGES
from tests.worker.model.model_server_stub import chunks, stub_server
from worker.ingest.store import IngestOptions
from worker.jobs import facts as runner_facts
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.model import engine_holder
from worker.model.openai_client import SCHEMA_IGNORED_LIMIT


@pytest.fixture
def stub():
    with stub_server() as server:
        yield server


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _facts_job(sessions, tmp_path: Path, count_tokens) -> int:
    """A generated contract ingested; the id of the key-facts job its ingest created."""
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="supply.pdf")
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name, "then_facts": True},
        )
        session.commit()
    ingest = runner_ingest.run_ingest(
        job.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=96),
        count_tokens=count_tokens,
    )
    assert ingest.facts_job_id is not None
    return ingest.facts_job_id


def _run(sessions, job_id: int, base_url: str) -> tuple[dict, dict]:
    """The job run with LONGDOC_LLM_BASE_URL set: (its stats, its facts by field)."""
    settings = Settings(llm_base_url=base_url, llm_concurrency=2)
    engine_holder.reset()
    try:
        outcome = runner_facts.run_facts(
            job_id, sessions=sessions, model_factory=lambda: engine_holder.get_chat_model(settings)
        )
    finally:
        engine_holder.reset()
    assert outcome.status == job_run.SUCCEEDED
    with sessions() as session:
        job = session.get(Job, job_id)
        rows = fact_service.list_facts(session=session, document_id=job.document_id)
        return dict(job.stats), {row.field: row for row in rows}


@pytest.mark.parametrize(
    ("reply", "num_requests_each", "num_json"),
    [
        ('{"answer": "Oregon"}', 1, "all"),  # the server followed the schema: its JSON is read
        ("Oregon", 2, 0),  # never JSON: asked once more, then the plain text is parsed
    ],
    ids=["json", "plain-after-one-retry"],
)
def test_key_facts_ask_for_the_schema_and_read_json_or_fall_back_to_text(
    sessions, tmp_path, count_tokens, stub, reply, num_requests_each, num_json
) -> None:
    stub.replies.append(chunks(reply))
    job_id = _facts_job(sessions, tmp_path, count_tokens)

    stats, facts = _run(sessions, job_id, stub.base_url)

    bodies = [body for _headers, body in stub.requests]
    assert bodies, "the fields the structure leaves empty are asked of the server"
    with_schema = [body for body in bodies if "response_format" in body]
    for body in with_schema:
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA
    asked = {body["messages"][-1]["content"] for body in bodies}
    if num_json == "all":
        assert len(bodies) == len(with_schema) == len(asked)
    else:
        # Each field asked with the schema is asked twice; once the server is seen to ignore
        # it (SCHEMA_IGNORED_LIMIT fields in a row), the rest are asked once, in plain text.
        by_field = Counter(body["messages"][-1]["content"] for body in with_schema)
        assert set(by_field.values()) == {num_requests_each}
        assert len(by_field) >= SCHEMA_IGNORED_LIMIT
        plain = [body["messages"][-1]["content"] for body in bodies if body not in with_schema]
        assert sorted(plain) == sorted(asked - set(by_field))
        assert len(asked) <= SCHEMA_IGNORED_LIMIT + 2 or plain  # 2: requests in flight
    assert stats["num_calls"] == len(asked)
    assert stats["num_json_replies"] == (len(asked) if num_json == "all" else num_json)
    law = facts["governing_law"]
    assert (law.value, law.source, law.page) == ("Oregon", "model", 3)
