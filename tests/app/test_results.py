"""Saving summaries and answers once per job, on SQLite and PostgreSQL."""

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Answer, JobKind, Summary, SummaryMethod, SupportStatus
from app.services import documents, jobs, results
from tests.app.new_documents import new_document


def _document_and_job(
    session: Session, kind: JobKind = JobKind.SUMMARIZE, seed: str = "a"
) -> tuple[int, int]:
    document = documents.store_document(session=session, new=new_document(seed))
    job = jobs.create_job(session=session, kind=kind, document_id=document.id)
    session.commit()
    return document.id, job.id


def test_a_second_save_for_the_same_job_returns_the_first(session: Session) -> None:
    document_id, job_id = _document_and_job(session)

    first = results.save_summary(
        session=session,
        job_id=job_id,
        document_id=document_id,
        method=SummaryMethod.ONE_PASS,
        text="one",
        model="m",
        stats={"num_sections": 1},
    )
    session.commit()
    again = results.save_summary(
        session=session,
        job_id=job_id,
        document_id=document_id,
        method="hierarchical",
        text="two",
        model="m",
    )
    session.commit()

    assert again.id == first.id and again.text == "one"
    assert session.scalar(select(func.count()).select_from(Summary)) == 1
    assert results.get_summary_for_job(session=session, job_id=job_id).stats == {"num_sections": 1}


def test_a_concurrent_save_loses_quietly(session: Session) -> None:
    # Two deliveries of one job in two sessions: both miss the other's row before inserting.
    if session.get_bind().dialect.name == "sqlite":
        pytest.skip("SQLite serializes writers: a reader with a stale snapshot cannot write")
    document_id, job_id = _document_and_job(session, JobKind.ANSWER)
    sessions = sessionmaker(bind=session.get_bind())
    kwargs = dict(
        job_id=job_id,
        document_id=document_id,
        question="q",
        cited_pages=[2],
        cited_passage_ids=[],
        model="m",
    )
    with sessions() as one, sessions() as two:
        assert results.get_answer_for_job(session=two, job_id=job_id) is None
        first = results.save_answer(session=one, answer="first", **kwargs)
        one.commit()
        second = results.save_answer(session=two, answer="second", **kwargs)
        two.commit()
        assert second.id == first.id and second.answer == "first"
    assert session.scalar(select(func.count()).select_from(Answer)) == 1


def test_documents_needing_summary_skips_summarized_and_already_tried(session: Session) -> None:
    plain = documents.store_document(session=session, new=new_document("plain"))
    summarized = documents.store_document(session=session, new=new_document("summarized"))
    tried = documents.store_document(session=session, new=new_document("tried"))
    job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=summarized.id)
    results.save_summary(
        session=session,
        job_id=job.id,
        document_id=summarized.id,
        method="one_pass",
        text="s",
        model="m",
    )
    failed = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=tried.id)
    jobs.fail_job(session=session, job_id=failed.id, error_code="x", sentence="It failed.")
    jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=plain.id)
    session.commit()

    assert results.documents_needing_summary(session=session) == [plain.id]
    assert [s.id for s in results.list_summaries(session=session, document_id=summarized.id)] == [
        results.get_summary_for_job(session=session, job_id=job.id).id
    ]


QUOTE = {
    "text": "This Agreement is governed by the laws of Ohio.",
    "page": 3,
    "start_char": 120,
    "end_char": 167,
    "passage_ordinal": 4,
    "score": 0.5,
}


def test_quotes_support_and_key_passages_round_trip(session: Session) -> None:
    document_id, summary_job = _document_and_job(session)
    answer_job = jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=document_id).id
    session.commit()
    results.save_summary(
        session=session,
        job_id=summary_job,
        document_id=document_id,
        method="one_pass",
        text="s",
        model="m",
        key_passages=[QUOTE, {**QUOTE, "page": 5, "start_char": 300, "end_char": 347}],
    )
    results.save_answer(
        session=session,
        job_id=answer_job,
        document_id=document_id,
        question="Which law governs?",
        answer='"This Agreement is governed by the laws of Ohio." (quoted from p. 3)',
        cited_pages=[3],
        cited_passage_ids=[],
        model="m",
        quotes=[QUOTE],
        support="unsupported",
        model_answer="Nevada law governs.",
        unsupported_claims=["Nevada"],
    )
    session.commit()
    session.expunge_all()

    summary = results.get_summary_for_job(session=session, job_id=summary_job)
    assert [p["page"] for p in summary.key_passages] == [3, 5]
    assert summary.key_passages[0] == QUOTE
    answer = results.get_answer_for_job(session=session, job_id=answer_job)
    assert answer.quotes == [QUOTE]
    assert answer.support == SupportStatus.UNSUPPORTED
    assert (answer.model_answer, answer.unsupported_claims) == ("Nevada law governs.", ["Nevada"])


def test_an_answer_saved_the_old_way_has_no_quotes_and_no_support(session: Session) -> None:
    document_id, job_id = _document_and_job(session, JobKind.ANSWER)
    results.save_answer(
        session=session,
        job_id=job_id,
        document_id=document_id,
        question="q",
        answer="a",
        cited_pages=[],
        cited_passage_ids=[],
        model="m",
    )
    session.commit()
    session.expunge_all()
    answer = results.get_answer_for_job(session=session, job_id=job_id)
    assert (answer.quotes, answer.support, answer.model_answer) == ([], None, None)


def test_a_quote_without_its_page_is_refused(session: Session) -> None:
    document_id, job_id = _document_and_job(session)
    with pytest.raises(ValueError, match="page"):
        results.save_summary(
            session=session,
            job_id=job_id,
            document_id=document_id,
            method="one_pass",
            text="s",
            model="m",
            key_passages=[{"text": "t", "start_char": 0, "end_char": 1}],
        )


def test_a_summarys_checked_sentences_round_trip_and_read_as_views(session: Session) -> None:
    from app.services.summary_sentences import sentence_views, support_line

    document_id, job_id = _document_and_job(session)
    quote = {"text": "Ohio law governs.", "page": 4, "start_char": 10, "end_char": 27}
    results.save_summary(
        session=session,
        job_id=job_id,
        document_id=document_id,
        method="one_pass",
        text="Ohio law governs it. Nevada courts hear disputes.",
        model="m",
        sentence_support=[
            {"text": "Ohio law governs it.", "status": "supported", "quotes": [quote]},
            {"text": "Nevada courts hear disputes.", "status": "unsupported",
             "quotes": [], "missing": ["Nevada"]},
        ],
    )  # fmt: skip
    session.commit()
    session.expire_all()
    (stored,) = results.list_summaries(session=session, document_id=document_id)
    supported, invented = sentence_views(stored.sentence_support)
    assert supported.is_supported and supported.page == 4 and supported.note == ""
    assert supported.quotes[0]["passage_ordinal"] == -1  # filled in as for any quote
    assert not invented.is_supported and invented.page is None
    assert invented.note == 'not in the document: "Nevada"'
    assert support_line([supported, invented]) == (
        "1 of 2 sentences rest on a quoted passage of the document; 1 is set apart below, not "
        "supported by it."
    )
    assert (
        support_line([supported]) == "Every sentence (1) rests on a quoted passage of the document."
    )


def test_a_summary_sentence_with_an_unknown_status_is_refused(session: Session) -> None:
    document_id, job_id = _document_and_job(session)
    with pytest.raises(ValueError, match="status is one of"):
        results.save_summary(
            session=session,
            job_id=job_id,
            document_id=document_id,
            method="one_pass",
            text="t",
            model="m",
            sentence_support=[{"text": "t", "status": "maybe", "quotes": []}],
        )


def test_a_summarys_lead_is_stored_and_replaced_on_every_summary_of_its_document(
    session: Session,
) -> None:
    document_id, first_job = _document_and_job(session)
    other_document, other_job = _document_and_job(session, seed="b")
    second_job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document_id)
    session.flush()
    quote = {"text": "SUPREME COURT OF OHIO", "page": 1, "start_char": 0, "end_char": 21}
    court = {"text": "Court: SUPREME COURT OF OHIO.", "status": "supported", "quotes": [quote]}
    for job_id, doc in (
        (first_job, document_id),
        (second_job.id, document_id),
        (other_job, other_document),
    ):
        results.save_summary(
            session=session, job_id=job_id, document_id=doc, method="one_pass", text="t",
            model="m", lead=[court],
        )  # fmt: skip
    session.commit()

    outcome = {"text": "Disposition: reversed.", "status": "supported", "quotes": [quote]}
    assert results.set_summary_leads(session=session, document_id=document_id, lead=[outcome]) == 2
    session.commit()
    session.expire_all()

    leads = {s.job_id: [row["text"] for row in s.lead] for s in session.scalars(select(Summary))}
    assert leads == {
        first_job: ["Disposition: reversed."],
        second_job.id: ["Disposition: reversed."],
        other_job: ["Court: SUPREME COURT OF OHIO."],  # another document's: untouched
    }
    with pytest.raises(ValueError, match="status is one of"):
        results.set_summary_leads(
            session=session, document_id=document_id, lead=[{**outcome, "status": "maybe"}]
        )
