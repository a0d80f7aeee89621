"""The summary and answer jobs store key passages, quotes and support (worker/jobs/summary.py and answer.py called
directly, the echo model standing in for the engine, the real database)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind, SupportStatus
from app.services import jobs, results
from tests.pipelines.contract_pdf import contract_pdf
from tests.pipelines.echo_model import EchoModel, count_words
from worker.ingest.store import IngestOptions
from worker.jobs import answer as answer_run
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import summary as summary_run


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _ingested(sessions, tmp_path: Path) -> tuple[int, int]:
    """(document id, the follow-up summarize job id) of a 6-page contract."""
    path = contract_pdf(tmp_path, num_pages=6, law_page=5)
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name, "then_summarize": True},
        )
        session.commit()
    outcome = runner_ingest.run_ingest(
        job.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=40),
        count_tokens=count_words,
    )
    with sessions() as session:
        return session.get(Job, job.id).document_id, outcome.follow_up_job_ids[0]


def test_the_summary_job_stores_key_passages_with_the_summary(sessions, tmp_path) -> None:
    document_id, job_id = _ingested(sessions, tmp_path)

    outcome = summary_run.run_summary(
        job_id, sessions=sessions, model_factory=EchoModel, max_new_tokens=200
    )

    assert outcome.status == job_run.SUCCEEDED
    with sessions() as session:
        summary = results.get_summary_for_job(session=session, job_id=job_id)
        assert summary.document_id == document_id and summary.text
        assert len(summary.key_passages) >= 5
        assert summary.key_passages[0]["page"] == 1
        assert "Quillfeather Mills" in summary.key_passages[0]["text"]
        pages = [quote["page"] for quote in summary.key_passages]
        assert pages == sorted(pages)
        assert summary.stats["num_key_passages"] == len(summary.key_passages)
        assert session.get(Job, job_id).stats["key_passages_seconds"] < 5


def test_the_summary_job_stores_every_sentence_with_its_quotes(sessions, tmp_path) -> None:
    _, job_id = _ingested(sessions, tmp_path)

    summary_run.run_summary(
        job_id, sessions=sessions, model_factory=lambda: EchoModel(extra_text=" It is governed by Nevada law."),
        max_new_tokens=200,
    )  # fmt: skip

    with sessions() as session:
        summary = results.get_summary_for_job(session=session, job_id=job_id)
        rows = summary.sentence_support
        assert rows and rows[0]["status"] == "supported"
        assert rows[0]["quotes"][0]["page"] == 1 and "Quillfeather" in rows[0]["quotes"][0]["text"]
        invented = [row for row in rows if "Nevada" in row["text"]]
        assert invented and all(row["status"] == "unsupported" for row in invented)
        assert summary.stats["num_summary_sentences"] == len(rows)


def test_the_embedder_supports_a_summary_sentence_that_paraphrases(tmp_path, embedder) -> None:
    from pipelines.retrieval.evidence import DocumentSentences
    from pipelines.summary.support import SUPPORTED, check_summary
    from tests.pipelines.contract_pdf import contract_document

    document = contract_document(tmp_path, num_pages=4, law_page=3)
    sentences = DocumentSentences(document.pages)
    text = "The contract is subject to Vermont statutes."
    (without,) = check_summary(text, sentences, document.passages)
    (checked,) = check_summary(text, sentences, document.passages, embedder=embedder)
    assert without.status != SUPPORTED  # few of its words are the clause's
    assert checked.status == SUPPORTED and checked.page == 3 and checked.cosine >= 0.7


@pytest.mark.parametrize(
    ("extra", "support", "replaced"),
    [
        (" Vermont law governs it.", SupportStatus.SUPPORTED, False),
        # The model's text names a state the document lacks: the governing-law clause, which
        # settles the question on its own, is the answer (supported), the model's text set apart.
        (" Nevada law.", SupportStatus.SUPPORTED, True),
    ],
)
def test_the_answer_job_stores_quotes_and_support(
    sessions, tmp_path, extra, support, replaced
) -> None:
    document_id, _ = _ingested(sessions, tmp_path)
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.ANSWER,
            document_id=document_id,
            params={"question": "Which state's law governs this agreement?"},
        )
        session.commit()

    outcome = answer_run.run_answer(
        job.id,
        sessions=sessions,
        model_factory=lambda: EchoModel(extra_text=extra),
        max_new_tokens=300,
    )

    assert outcome.status == job_run.SUCCEEDED
    with sessions() as session:
        answer = results.get_answer_for_job(session=session, job_id=job.id)
        assert answer.support == support
        best = answer.quotes[0]
        assert best["page"] == 5 and "State of Vermont" in " ".join(best["text"].split())
        if replaced:
            assert answer.answer.endswith("(quoted from p. 5)")
            assert answer.model_answer.endswith("Nevada law.")
            assert answer.unsupported_claims == ["Nevada"]
            assert answer.cited_pages == [5]
        else:
            assert answer.model_answer is None and answer.unsupported_claims == []


def test_an_ingest_run_again_after_it_succeeded_names_its_follow_ups_again(
    sessions, tmp_path
) -> None:
    # The ingest task commits the document and its follow-up jobs, then queues them; when that
    # fails (the database locked as a task id is written) the task retries: the job is done,
    # and the follow-ups must still be named so the task sends those never sent.
    path = contract_pdf(tmp_path, num_pages=2, law_page=2)
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name, "then_summarize": True},
        )
        session.commit()
    options = IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=40)
    first = runner_ingest.run_ingest(
        job.id, sessions=sessions, options=options, count_tokens=count_words
    )
    again = runner_ingest.run_ingest(
        job.id, sessions=sessions, options=options, count_tokens=count_words
    )
    assert (first.status, again.status) == (job_run.SUCCEEDED, job_run.SKIPPED)
    assert again.follow_up_job_ids == first.follow_up_job_ids and first.follow_up_job_ids
    assert again.facts_job_id == first.facts_job_id
