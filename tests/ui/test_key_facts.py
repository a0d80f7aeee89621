"""The document page's Key facts tab: each value with its quote, a click to the page with the
quote marked, empty fields said to be not found, and extracting again queued to the broker."""

from __future__ import annotations

from sqlalchemy import select

from app.db.models import Job, JobKind, JobStatus
from app.services import facts as fact_service
from app.services import jobs
from tests.ui.conftest import all_text, broker_messages, open_page
from tests.ui.seed import add_document

PAGES = [
    "Lease between Acme Holdings LLC and Beta Stores Inc. dated May 2, 2019.",
    "Either party may end the lease with notice. This Lease is governed by the laws of Ohio.",
]


def seed(sessions, files_dir) -> tuple[int, int]:
    with sessions() as session:
        document = add_document(session, files_dir, title="Office Lease", pages=PAGES)
        job = jobs.create_job(session=session, kind=JobKind.FACTS, document_id=document.id)
        law_start = len(PAGES[0]) + 2 + PAGES[1].index("This Lease")
        law_end = len(PAGES[0]) + 2 + len(PAGES[1])
        rows = fact_service.save_facts(
            session=session,
            job_id=job.id,
            document_id=document.id,
            model="smollm2-135m-instruct",
            facts=[
                fact_service.NewFact(
                    "governing_law",
                    "Governing law",
                    0,
                    "Ohio",
                    "Ohio",
                    0.9,
                    "model",
                    page=2,
                    evidence=[
                        {
                            "text": PAGES[1][PAGES[1].index("This Lease") :],
                            "page": 2,
                            "start_char": law_start,
                            "end_char": law_end,
                        }
                    ],
                ),
                fact_service.NewFact("renewal_term", "Renewal term", 1, "", "", 0.0, "none"),
                fact_service.NewFact(
                    "dosage",
                    "Dosage and administration",
                    2,
                    "10 mg | twice daily",
                    "10 mg | twice daily",
                    0.9,
                    "rule",
                    page=1,
                    evidence=[{"text": PAGES[0][:5], "page": 1, "start_char": 0, "end_char": 5}],
                    origin="section 2 DOSAGE AND ADMINISTRATION, p. 1",
                    value_table=[
                        {
                            "indication": "Gout",
                            "population": "Adults",
                            "dose": "10 mg | twice daily",
                            "page": 1,
                            "start_char": 0,
                            "end_char": 5,
                        }
                    ],
                ),
            ],
        )
        jobs.finish_job(session=session, job_id=job.id)
        session.commit()
        return document.id, rows[0].id


def test_the_key_facts_tab_quotes_each_value_and_opens_its_page(
    app_test, ui_settings, sessions
) -> None:
    document_id, law_id = seed(sessions, ui_settings.files_dir)
    at = open_page(app_test(), "views/document.py", doc=str(document_id))
    assert not at.exception
    text = all_text(at).replace("\\", "")
    assert "Governing law** · Ohio" in text
    assert "> This Lease is governed by the laws of Ohio." in text
    assert "read by the model, checked against the quote" in text
    assert "Renewal term** · :gray[not found in the text]" in text
    assert "2 of 3 fields found" in text
    # Where each value was read, and a value of several rows as a table with its pages.
    assert "From: section 2 DOSAGE AND ADMINISTRATION, p. 1" in text
    assert "| Indication | Population | Dose | Page |" in text
    assert "| Gout | Adults | 10 mg | twice daily | 1 |" in text  # the cell's "|" escaped

    at.button(key=f"fact-{law_id}-0").click().run()
    assert not at.exception
    (page,) = [m.value for m in at.markdown if "longdoc-page" in m.value and "<mark" in m.value]
    marked = page.split("<mark", 1)[1].split(">", 1)[1].split("</mark>", 1)[0]
    assert marked == "This Lease is governed by the laws of Ohio."
    assert "Highlighted: the quoted sentence" in all_text(at)


def test_extracting_again_queues_a_facts_job_on_the_batch_queue(
    app_test, ui_settings, sessions
) -> None:
    document_id, _ = seed(sessions, ui_settings.files_dir)
    at = open_page(app_test(), "views/document.py", doc=str(document_id))
    at.button(key="extract-facts").click().run()
    assert not at.exception
    with sessions() as session:
        job = session.scalars(select(Job).where(Job.status == JobStatus.QUEUED)).one()
        assert (job.kind, job.document_id) == (JobKind.FACTS, document_id)
    (message,) = broker_messages(ui_settings, "gpu_batch")
    assert message == {"task": "longdoc.facts", "id": job.task_id, "args": [job.id]}
    assert at.button(key="extract-facts").disabled  # one extraction at a time
    # The old facts stay shown until the new ones are saved.
    assert "Ohio" in all_text(at)


def test_a_document_without_facts_says_so(app_test, ui_settings, sessions) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Bare", pages=PAGES)
        session.commit()
    at = open_page(app_test(), "views/document.py", doc=str(document.id))
    assert not at.exception
    assert "No key facts yet." in all_text(at)
