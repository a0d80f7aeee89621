"""The upload page: generated PDFs, encrypted ones with and without their password, a file that
is not a PDF, the size limit, and live progress read from the job row."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from app.db.models import Job, JobKind, JobStatus
from app.services import documents, file_store, jobs
from tests.pipelines import pdf_factory
from tests.ui.conftest import all_text, broker_messages, open_page

PASSWORD = "s3cret-Pa55"


def upload(at, files: list[tuple[str, bytes]], *, password: str = "", kind: str | None = None):
    at.file_uploader[0].set_value([(name, data, "application/pdf") for name, data in files])
    if password:
        at.text_input[0].set_value(password)
    if kind is not None:
        at.selectbox[0].set_value(kind)
    at.button[0].click()  # the form's submit button
    return at.run()


def all_jobs(sessions) -> list[Job]:
    with sessions() as session:
        return list(session.scalars(select(Job).order_by(Job.id)))


def lease_pdf(folder: Path, name: str = "lease.pdf") -> bytes:
    path = pdf_factory.text_pdf(
        folder, ["Lease.\nThe tenant pays 900 dollars.", "Either party may end it."], name=name
    )
    return path.read_bytes()


def test_a_generated_pdf_is_stored_queued_and_shows_its_progress(
    app_test, ui_settings, sessions, tmp_path
) -> None:
    data = lease_pdf(tmp_path)
    at = open_page(app_test(), "views/upload.py")
    assert not at.exception
    upload(at, [("lease.pdf", data)], kind="legal")
    assert not at.exception, at.exception

    (job,) = all_jobs(sessions)
    assert (job.kind, job.status, job.task_id is not None) == (
        JobKind.INGEST,
        JobStatus.QUEUED,
        True,
    )
    assert job.params["file_name"] == "lease.pdf"
    assert job.params["kind"] == "legal" and job.params["then_summarize"] is True
    assert "password" not in job.params  # not encrypted: nothing to keep
    stored = Path(job.params["path"])
    assert stored.is_file() and stored.read_bytes() == data
    assert stored.is_relative_to(ui_settings.files_dir)
    (message,) = broker_messages(ui_settings, "ingest")
    assert message == {"task": "longdoc.ingest", "id": job.task_id, "args": [job.id]}
    assert "Waiting for a worker" in next(p.proto.text for p in at.get("progress"))

    # A worker's progress appears on the next run (the page polls), then a link at the end.
    with sessions() as session:
        jobs.start_job(session=session, job_id=job.id)
        jobs.update_progress(session=session, job_id=job.id, stage="parsing", done=3, total=7)
        session.commit()
    at.run()
    (bar,) = at.get("progress")
    assert "Reading pages · 3 of 7" in bar.proto.text
    with sessions() as session:
        document = documents.store_document(
            session=session,
            new=documents.NewDocument(
                content_hash=file_store.content_hash_of(stored),
                file_name="lease.pdf",
                kind="legal",
                num_tokens=12,
                pages=[documents.NewPage(1, "Lease."), documents.NewPage(2, "End.")],
                passages=[],
            ),
        )
        jobs.finish_job(session=session, job_id=job.id, document_id=document.id)
        session.commit()
    at.run()
    links = at.get("page_link")
    assert [link.proto.label for link in links] == ["Open the document"]
    assert links[0].proto.query_string == f"doc={document.id}"


def test_several_files_at_once_make_one_job_each(app_test, ui_settings, sessions, tmp_path):
    at = open_page(app_test(), "views/upload.py")
    upload(at, [("a.pdf", lease_pdf(tmp_path, "a.pdf")), ("b.pdf", lease_pdf(tmp_path / ".."))])
    assert [j.params["file_name"] for j in all_jobs(sessions)] == ["a.pdf", "b.pdf"]
    assert len(broker_messages(ui_settings, "ingest")) == 2


def test_an_encrypted_pdf_needs_its_password_and_then_is_queued_with_it(
    app_test, ui_settings, sessions, tmp_path
) -> None:
    source = pdf_factory.text_pdf(tmp_path, ["Patient chart, page one."], name="plain.pdf")
    data = pdf_factory.encrypted_pdf(
        source, user_password=PASSWORD, owner_password="owner-pass"
    ).read_bytes()
    at = open_page(app_test(), "views/upload.py")

    upload(at, [("chart.pdf", data)])
    assert "protected by a password" in all_text(at)
    assert all_jobs(sessions) == [] and broker_messages(ui_settings, "ingest") == []

    upload(at, [("chart.pdf", data)], password="wrong")
    assert "The password does not open chart.pdf" in all_text(at)
    assert all_jobs(sessions) == []

    upload(at, [("chart.pdf", data)], password=PASSWORD)
    (job,) = all_jobs(sessions)
    # The worker reads the password from the job's params (worker/jobs/ingest.py).
    assert job.params["password"] == PASSWORD
    (message,) = broker_messages(ui_settings, "ingest")
    assert message["args"] == [job.id]
    assert PASSWORD not in str(message)


def test_a_file_that_is_not_a_pdf_is_refused_with_a_sentence(app_test, ui_settings, sessions):
    at = open_page(app_test(), "views/upload.py")
    upload(at, [("letter.pdf", b"Dear Sir, this is a plain text letter.\n" * 20)])
    assert "letter.pdf is not a PDF" in all_text(at)
    assert all_jobs(sessions) == []
    assert broker_messages(ui_settings, "ingest") == []
    assert not list(ui_settings.files_dir.rglob("*.pdf"))


def test_a_file_past_the_size_limit_is_refused_with_the_limit_named(
    app_test, ui_settings, sessions, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.settings import get_settings

    monkeypatch.setenv("LONGDOC_MAX_UPLOAD_BYTES", "1000")
    get_settings.cache_clear()
    data = lease_pdf(tmp_path)
    assert len(data) > 1000
    at = open_page(app_test(), "views/upload.py")
    upload(at, [("big.pdf", data)])
    assert "LongDoc takes PDFs up to" in all_text(at)
    assert "LONGDOC_MAX_UPLOAD_BYTES" in all_text(at)
    assert all_jobs(sessions) == []


def test_a_file_already_in_the_library_links_to_it(app_test, ui_settings, sessions, tmp_path):
    data = lease_pdf(tmp_path)
    path = tmp_path / "lease.pdf"
    with sessions() as session:
        document = documents.store_document(
            session=session,
            new=documents.NewDocument(
                content_hash=file_store.content_hash_of(path),
                file_name="lease.pdf",
                kind="legal",
                num_tokens=1,
                pages=[documents.NewPage(1, "x")],
                passages=[],
            ),
        )
        session.commit()
    at = open_page(app_test(), "views/upload.py")
    upload(at, [("lease-copy.pdf", data)])
    assert "already in the library" in all_text(at)
    assert at.get("page_link")[0].proto.query_string == f"doc={document.id}"
    assert all_jobs(sessions) == []
