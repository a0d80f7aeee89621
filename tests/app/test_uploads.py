"""Queueing an upload (app.services.uploads): refused with a sentence, already present, or stored
and queued on the embedded broker with typed params; on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Job, JobKind, JobStatus
from app.services import collections, dispatch, documents, file_store, jobs, uploads
from app.services.jobs import IngestParams
from app.settings import Settings
from tests.app.test_dispatch import make_settings, take_message
from tests.app.test_services import new_document
from tests.pipelines import pdf_factory

PASSWORD = "s3cret-Pa55"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def lease(tmp_path: Path) -> bytes:
    return pdf_factory.text_pdf(tmp_path, ["Lease.\nThe tenant pays 900 dollars."]).read_bytes()


def _jobs(session: Session) -> list[Job]:
    return list(session.scalars(select(Job).order_by(Job.id)))


def test_a_pdf_is_stored_and_queued_with_typed_params(
    session: Session, settings: Settings, lease: bytes
) -> None:
    result = uploads.queue_upload(
        session=session,
        settings=settings,
        file_name="lease.pdf",
        data=lease,
        kind="legal",
        summarize=False,
    )

    (job,) = _jobs(session)
    assert result == uploads.UploadResult(file_name="lease.pdf", job_id=job.id)
    assert (job.kind, job.status, job.task_id is not None) == (
        JobKind.INGEST,
        JobStatus.QUEUED,
        True,
    )
    params = IngestParams.from_dict(job.params)
    assert params == IngestParams(
        file_name="lease.pdf",
        path=params.path,
        source="upload",
        kind="legal",
        then_summarize=False,
    )
    assert Path(params.path).read_bytes() == lease
    assert Path(params.path).is_relative_to(settings.files_dir)
    assert "password" not in job.params and "collection_id" not in job.params
    message = take_message(settings, dispatch.QUEUE_INGEST)
    assert (message["headers"]["task"], message["body"][0]) == (dispatch.TASK_INGEST, [job.id])


def test_an_encrypted_pdf_keeps_its_password_on_the_job_and_a_plain_one_does_not(
    session: Session, settings: Settings, tmp_path: Path, lease: bytes
) -> None:
    source = pdf_factory.text_pdf(tmp_path, ["Patient chart."], name="plain.pdf")
    locked = pdf_factory.encrypted_pdf(source, user_password=PASSWORD, owner_password="o")

    needed = uploads.queue_upload(
        session=session, settings=settings, file_name="chart.pdf", data=locked.read_bytes()
    )
    wrong = uploads.queue_upload(
        session=session,
        settings=settings,
        file_name="chart.pdf",
        data=locked.read_bytes(),
        password="wrong",
    )
    assert "protected by a password" in needed.refusal
    assert wrong.refusal == "The password does not open chart.pdf. Check it and try again."
    assert _jobs(session) == []

    right = uploads.queue_upload(
        session=session,
        settings=settings,
        file_name="chart.pdf",
        data=locked.read_bytes(),
        password=PASSWORD,
    )
    plain = uploads.queue_upload(
        session=session, settings=settings, file_name="lease.pdf", data=lease, password=PASSWORD
    )

    by_id = {job.id: job for job in _jobs(session)}
    assert by_id[right.job_id].params["password"] == PASSWORD
    assert "password" not in by_id[plain.job_id].params


def test_an_upload_is_named_without_bidi_overrides_and_never_unnamed() -> None:
    assert "\u202e" not in uploads.upload_name("evil\u202efdp.exe")
    assert uploads.upload_name("") == "unnamed.pdf"


def test_a_refused_file_gets_its_sentence_and_nothing_is_stored(
    session: Session, settings: Settings
) -> None:
    result = uploads.queue_upload(
        session=session, settings=settings, file_name="letter.pdf", data=b"Dear Sir.\n" * 50
    )

    assert result.job_id is None and result.present_document_id is None
    assert result.refusal.startswith("letter.pdf is not a PDF.")
    assert _jobs(session) == [] and not settings.files_dir.exists()


def test_a_file_already_stored_joins_the_collection_without_a_job(
    session: Session, settings: Settings, tmp_path: Path, lease: bytes
) -> None:
    path = tmp_path / "lease.pdf"
    path.write_bytes(lease)
    same_file = replace(new_document(), content_hash=file_store.content_hash_of(path))
    stored = documents.store_document(session=session, new=same_file)
    matter = collections.create_collection(session=session, name="Matter")
    session.commit()

    result = uploads.queue_upload(
        session=session,
        settings=settings,
        file_name="copy.pdf",
        data=lease,
        collection_id=matter.id,
    )

    assert result == uploads.UploadResult(file_name="copy.pdf", present_document_id=stored.id)
    assert _jobs(session) == []
    assert collections.document_ids_of(session=session, collection_id=matter.id) == [stored.id]


def test_a_new_file_for_a_collection_carries_it_to_the_worker(
    session: Session, settings: Settings, lease: bytes
) -> None:
    matter = collections.create_collection(session=session, name="Matter")
    session.commit()

    result = uploads.queue_upload(
        session=session, settings=settings, file_name="a.pdf", data=lease, collection_id=matter.id
    )

    job = jobs.get_job(session=session, job_id=result.job_id)
    assert IngestParams.from_dict(job.params).collection_id == matter.id
    assert IngestParams.from_dict(job.params).kind is None  # "auto": guessed by the worker


def test_ingest_params_round_trip_and_read_old_rows() -> None:
    params = IngestParams(
        file_name="a.pdf",
        path="/files/ab.pdf",
        source="inbox",
        kind="medical",
        password="pw",
        then_summarize=True,
        collection_id=3,
    )
    assert IngestParams.from_dict(params.to_dict()) == params
    assert IngestParams(file_name="a.pdf").to_dict() == {
        "file_name": "a.pdf",
        "then_summarize": False,
    }
    # A row written by hand or by an older version: missing keys, odd types, extra keys.
    old = {"path": "/x.pdf", "then_summarize": 1, "collection_id": "7", "extra": [1]}
    assert IngestParams.from_dict(old) == IngestParams(
        file_name="", path="/x.pdf", then_summarize=True
    )
    assert IngestParams.from_dict(None) == IngestParams(file_name="")


def test_forget_password_keeps_the_other_params(session: Session) -> None:
    params = IngestParams(file_name="a.pdf", path="/x.pdf", password="pw")
    job = jobs.create_ingest_job(session=session, params=params)
    session.commit()

    jobs.forget_password(session=session, job_id=job.id)
    session.commit()

    assert jobs.get_job(session=session, job_id=job.id).params == {
        "file_name": "a.pdf",
        "path": "/x.pdf",
        "then_summarize": False,
    }
    assert jobs.forget_password(session=session, job_id=job.id + 100) is None
