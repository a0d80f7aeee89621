"""A summary leads with the document's key facts (pipelines.summary.lead, stored on Summary.lead):
set when the summary is saved after its facts, and set or replaced whenever the facts job saves,
whichever of the two jobs ends first (worker/jobs/summary.py and facts.py, the real database)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind
from app.services import jobs, results
from tests.pipelines import pdf_factory
from tests.pipelines.echo_model import EchoModel, count_words
from tests.pipelines.facts_documents import CONTRACT_PAGES, ScriptedModel
from worker.ingest.store import IngestOptions
from worker.jobs import facts as runner_facts
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import summary as summary_run

LAW_QUESTION = "Which state's or country's law governs this agreement?"


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _ingested(sessions, tmp_path: Path) -> job_run.RunOutcome:
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="supply.pdf")
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={
                "path": str(path),
                "file_name": path.name,
                "then_summarize": True,
                "then_facts": True,
            },
        )
        session.commit()
    return runner_ingest.run_ingest(
        job.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=60),
        count_tokens=count_words,
    )


def _facts(sessions, job_id: int, law: str) -> None:
    model = ScriptedModel({LAW_QUESTION: law})
    outcome = runner_facts.run_facts(job_id, sessions=sessions, model_factory=lambda: model)
    assert outcome.status == job_run.SUCCEEDED


def _summary(sessions, job_id: int) -> None:
    outcome = summary_run.run_summary(
        job_id, sessions=sessions, model_factory=EchoModel, max_new_tokens=120
    )
    assert outcome.status == job_run.SUCCEEDED


def _lead(sessions, summary_job_id: int) -> list[dict]:
    with sessions() as session:
        return results.get_summary_for_job(session=session, job_id=summary_job_id).lead


def test_a_summary_saved_after_the_facts_leads_with_them(sessions, tmp_path) -> None:
    ingest = _ingested(sessions, tmp_path)
    (summary_job,) = ingest.follow_up_job_ids
    _facts(sessions, ingest.facts_job_id, "Oregon")

    _summary(sessions, summary_job)

    lead = _lead(sessions, summary_job)
    by_label = {row["text"].split(":")[0]: row for row in lead}
    # A contract's lead: what agreement, between whom, for how long, under which law; its date,
    # notice period and clauses (assignment) stay on the facts tab.
    assert list(by_label) == ["Agreement", "Parties", "Term", "Governing law"]
    assert all(row["status"] == "supported" for row in lead)
    law = by_label["Governing law"]
    assert law["text"] == "Governing law: Oregon."
    assert law["quotes"][0]["page"] == 3
    assert "laws of the State of Oregon" in law["quotes"][0]["text"]
    assert by_label["Agreement"]["text"] == "Agreement: MASTER SUPPLY AGREEMENT."
    assert by_label["Term"]["text"] == "Term: ends March 31, 2026; renews for one (1) year."
    assert by_label["Term"]["quotes"][0]["page"] == 2
    assert "Quillfeather Instruments, Inc." in by_label["Parties"]["text"]
    assert by_label["Parties"]["quotes"][0]["page"] == 1
    with sessions() as session:
        summary = results.get_summary_for_job(session=session, job_id=summary_job)
        assert "Oregon" not in summary.text  # the model's text is stored apart from the lead


def test_facts_saved_after_the_summary_give_it_its_lead_and_replace_it(sessions, tmp_path) -> None:
    ingest = _ingested(sessions, tmp_path)
    (summary_job,) = ingest.follow_up_job_ids
    _summary(sessions, summary_job)
    assert _lead(sessions, summary_job) == []  # no facts yet: nothing to lead with

    _facts(sessions, ingest.facts_job_id, "Oregon")
    assert "Governing law: Oregon." in [row["text"] for row in _lead(sessions, summary_job)]

    first = _lead(sessions, summary_job)

    # The facts job run again (the model naming another state, which the text does not hold
    # and validation refuses): the lead is the new facts', not the old and the new together.
    with sessions() as session:
        again = jobs.create_job(
            session=session, kind=JobKind.FACTS, document_id=_document_id(session, summary_job)
        )
        session.commit()
    _facts(sessions, again.id, "Nevada")
    assert _lead(sessions, summary_job) == first


def _document_id(session: Session, summary_job_id: int) -> int:
    return results.get_summary_for_job(session=session, job_id=summary_job_id).document_id
