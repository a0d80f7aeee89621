"""Answers from stored key facts: the answer job reads the document's facts (worker/jobs/known_facts.py)
and a question one of them answers gets it; the real embedder matches paraphrases and keeps
other questions away."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import FactSource, JobKind, SupportStatus
from app.services import facts as fact_service
from app.services import jobs, results
from pipelines.answer.from_facts import fact_answer
from pipelines.retrieval.evidence import DocumentSentences
from tests.pipelines.contract_pdf import contract_document
from tests.pipelines.echo_model import EchoModel
from tests.worker.jobs.test_runner_evidence import _ingested
from worker.jobs import answer as answer_run
from worker.jobs import job_run
from worker.jobs.known_facts import known_facts


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _law_sentence(text: str) -> tuple[int, int]:
    start = text.index("This Agreement shall be governed")
    return start, text.index("rules.", start) + len("rules.")


def _fact_and_question(session, document_id: int, fact: fact_service.NewFact):
    """A facts job that stored `fact`, and an answer job asking about the governing law."""
    facts_job = jobs.create_job(session=session, kind=JobKind.FACTS, document_id=document_id)
    session.flush()
    fact_service.save_facts(
        session=session, job_id=facts_job.id, document_id=document_id, model="test", facts=[fact]
    )
    return jobs.create_job(
        session=session,
        kind=JobKind.ANSWER,
        document_id=document_id,
        params={"question": "Which state's law governs this agreement?"},
    )


def test_the_answer_job_answers_from_the_stored_governing_law_fact(sessions, tmp_path) -> None:
    document_id, _ = _ingested(sessions, tmp_path)
    with sessions() as session:
        from app.services import documents
        from pipelines.documents import PageText, document_text

        pages = documents.get_pages(session=session, document_id=document_id)
        text = document_text([PageText(p.number, p.text) for p in pages])
        start, end = _law_sentence(text)
        answer_job = _fact_and_question(
            session,
            document_id,
            fact_service.NewFact(
                field="governing_law",
                label="Governing law",
                position=7,
                value="Vermont",
                normalized_value="Vermont",
                confidence=0.9,
                source=FactSource.RULE,
                page=5,
                evidence=[
                    {"text": text[start:end], "page": 5, "start_char": start, "end_char": end}
                ],
            ),
        )
        session.commit()
    assert [fact.field for fact in known_facts(sessions, document_id)] == ["governing_law"]

    model = EchoModel()
    outcome = answer_run.run_answer(
        answer_job.id, sessions=sessions, model_factory=lambda: model, max_new_tokens=50
    )
    assert outcome.status == job_run.SUCCEEDED and model.prompts == []
    with sessions() as session:
        answer = results.get_answer_for_job(session=session, job_id=answer_job.id)
        assert answer.answer == "Governing law: Vermont [p. 5]"
        assert answer.support == SupportStatus.SUPPORTED and answer.cited_pages == [5]
        assert answer.quotes[0]["start_char"] == start and answer.stats["method"] == "key_fact"


@pytest.mark.parametrize(
    ("question", "field"),
    [
        ("What law governs the contract?", "governing_law"),
        ("Under which state's law is this agreement governed?", "governing_law"),
        ("Who are the contracting parties?", "parties"),
        ("When was the contract signed?", "agreement_date"),
        ("When can the agreement be terminated?", None),
        ("Who pays the fees?", None),
        ("What state is the company incorporated in?", None),
        ("Who can terminate the agreement?", None),
    ],
)
def test_the_embedder_matches_paraphrases_and_nothing_else(
    tmp_path, embedder, question, field
) -> None:
    from tests.pipelines.answer.test_from_facts import _facts

    document = contract_document(tmp_path, num_pages=4, law_page=3)
    sentences = DocumentSentences(document.pages)
    found = fact_answer(question, _facts(document), sentences, document.passages, embedder=embedder)
    assert (found.fact.field if found else None) == field


def test_a_field_the_facts_job_left_empty_is_answered_by_a_quote_that_states_it(
    sessions, tmp_path
) -> None:
    document_id, _ = _ingested(sessions, tmp_path)
    with sessions() as session:
        answer_job = _fact_and_question(
            session,
            document_id,
            fact_service.NewFact("governing_law", "Governing law", 7, "", "", 0.0, FactSource.NONE),
        )
        session.commit()
    (known,) = known_facts(sessions, document_id)
    assert known.missing and known.value == "" and known.spans == ()

    model = EchoModel()
    outcome = answer_run.run_answer(
        answer_job.id, sessions=sessions, model_factory=lambda: model, max_new_tokens=50
    )
    assert outcome.status == job_run.SUCCEEDED and model.prompts == []
    with sessions() as session:
        answer = results.get_answer_for_job(session=session, job_id=answer_job.id)
        # "Not found" only when nothing relevant was found: the governing-law clause is among
        # the quotes, so it is the answer, with its page, and no model call.
        assert answer.answer.endswith("(quoted from p. 5)") and "State of Vermont" in answer.answer
        assert answer.support == SupportStatus.SUPPORTED and answer.cited_pages == [5]
        assert answer.quotes and answer.stats["method"] == "key_fact"
