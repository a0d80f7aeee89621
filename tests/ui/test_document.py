"""The document page: the summary and how it was made, summarize again, questions queued to the
broker, answers whose citations open the page with the cited passage marked, the page viewer."""

from __future__ import annotations

import logging

from sqlalchemy import select

from app.db.models import Document, Job, JobKind, JobStatus
from app.services import jobs
from tests.ui.conftest import all_text, broker_messages, open_page
from tests.ui.seed import add_answer, add_document, add_summary

PAGES = [
    "Lease between Acme and Beta. The rent is 900 dollars a month.",
    "Either party may end the lease with three months notice. Notice must be written.",
]


def seed_lease(sessions, files_dir) -> int:
    with sessions() as session:
        document = add_document(session, files_dir, title="Office Lease", pages=PAGES)
        add_summary(
            session,
            document.id,
            "Acme leases an office to Beta for 900 dollars a month.",
            method="hierarchical",
            stats={"section_pages": [[1, 1], [2, 2]]},
        )
        session.commit()
        return document.id


def open_document(app_test, document_id: int):
    return open_page(app_test(), "views/document.py", doc=str(document_id))


def test_the_summary_shows_how_it_was_made_and_can_be_made_again(
    app_test, ui_settings, sessions
) -> None:
    document_id = seed_lease(sessions, ui_settings.files_dir)
    at = open_document(app_test, document_id)
    assert not at.exception
    text = all_text(at)
    assert "Acme leases an office to Beta" in text
    assert "Hierarchical: summaries of 2 sections, then combined" in text

    at.button(key="summarize").click().run()
    with sessions() as session:
        job = session.scalars(select(Job).where(Job.status == JobStatus.QUEUED)).one()
        assert (job.kind, job.document_id) == (JobKind.SUMMARIZE, document_id)
    (message,) = broker_messages(ui_settings, "gpu_batch")
    assert message == {"task": "longdoc.summarize", "id": job.task_id, "args": [job.id]}
    assert at.button(key="summarize").disabled  # one summary at a time
    assert any("Waiting for a worker" in p.proto.text for p in at.get("progress"))


def test_asking_a_question_queues_an_answer_job_and_keeps_the_question_out_of_logs(
    app_test, ui_settings, sessions, caplog
) -> None:
    document_id = seed_lease(sessions, ui_settings.files_dir)
    question = "What notice does the tenant owe before leaving?"
    caplog.set_level(logging.DEBUG)
    at = open_document(app_test, document_id)
    at.chat_input(key="question").set_value(question).run()
    assert not at.exception
    with sessions() as session:
        (job,) = session.scalars(select(Job).where(Job.kind == JobKind.ANSWER)).all()
        assert (job.params, job.document_id, job.status) == (
            {"question": question},
            document_id,
            JobStatus.QUEUED,
        )
    (message,) = broker_messages(ui_settings, "gpu")
    assert message == {"task": "longdoc.answer", "id": job.task_id, "args": [job.id]}
    assert question in next(c.value for c in at.chat_message[0].markdown).replace("\\", "")
    for secret in (question, PAGES[0], PAGES[1]):
        assert secret not in caplog.text

    # A failed answer shows its sentence under the question.
    with sessions() as session:
        jobs.fail_job(session=session, job_id=job.id, error_code="x", sentence="The model broke.")
        session.commit()
    at.run()
    assert "Answer job" in all_text(at) and "The model broke." in all_text(at)


def test_a_citation_opens_its_page_with_the_cited_passage_marked(
    app_test, ui_settings, sessions
) -> None:
    document_id = seed_lease(sessions, ui_settings.files_dir)
    with sessions() as session:
        document = session.get(Document, document_id)
        notice = next(p for p in document.passages if p.text.startswith("Either party"))
        add_answer(
            session,
            document_id,
            "How can the lease end?",
            "With three months notice [p. 2].",
            [2],
            [notice.id],
        )
        session.commit()
    at = open_document(app_test, document_id)
    assert "With three months notice [p. 2]." in all_text(at)
    at.button(key="cite-1-2").click().run()
    assert not at.exception
    # The dialog's page beside the Pages tab's viewer (which marks nothing).
    (page,) = [m.value for m in at.markdown if "longdoc-page" in m.value and "<mark" in m.value]
    marked = page.split("<mark", 1)[1].split(">", 1)[1].split("</mark>", 1)[0]
    assert marked == "Either party may end the lease with three months notice."
    assert "Notice must be written." in page.split("</mark>", 1)[1]  # on the page, not marked
    assert "Highlighted: the passages the answer drew on." in all_text(at)
    at.button(key="close-citation").click().run()
    assert not [m for m in at.markdown if "longdoc-page" in m.value and "<mark" in m.value]


def test_the_page_viewer_shows_each_page_escaped(app_test, ui_settings, sessions) -> None:
    with sessions() as session:
        document = add_document(
            session,
            ui_settings.files_dir,
            title="Tricky",
            pages=["First page.", "Second <b>page</b> & more."],
        )
        session.commit()
    at = open_document(app_test, document.id)
    at.number_input(key="page_number").set_value(2).run()
    (page,) = [m.value for m in at.markdown if "longdoc-page" in m.value]
    assert "Second &lt;b&gt;page&lt;/b&gt; &amp; more." in page
    assert "Page 2 of 2" in all_text(at)


def test_a_missing_document_says_so(app_test, ui_settings) -> None:
    at = open_page(app_test(), "views/document.py", doc="999")
    assert "There is no document #999" in all_text(at)


def test_a_question_of_invisible_characters_is_refused_with_its_sentence(
    app_test, ui_settings, sessions
) -> None:
    # str.strip() keeps U+200B: the page let it through; the service reads it as it looks.
    document_id = seed_lease(sessions, ui_settings.files_dir)
    at = open_document(app_test, document_id)
    at.chat_input(key="question").set_value("\u200b\u200b\u2060").run()
    assert not at.exception
    assert "The question is empty" in " ".join(error.value for error in at.error)
    with sessions() as session:
        assert session.scalars(select(Job).where(Job.kind == JobKind.ANSWER)).all() == []
    assert broker_messages(ui_settings, "gpu") == []


def test_a_summary_of_a_document_with_planted_instructions_says_they_were_left_out(
    app_test, ui_settings, sessions
) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Lease", pages=PAGES)
        stats = {"num_instruction_spans_left_out": 2}
        add_summary(session, document.id, "Acme leases an office to Beta.", stats=stats)
        session.commit()
    text = all_text(open_document(app_test, document.id))
    assert "2 passages written as instructions to a model" in text
