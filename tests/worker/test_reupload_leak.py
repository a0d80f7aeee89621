"""A re-upload tells nothing of another's document (accounts, issue 25; migration 0015), on
SQLite and PostgreSQL: a file stored only as a document its uploader may not read is answered
as a new file (queued, no id), and the job stores a document of the uploader's own, never
reaching the other, its collections or its id; a file they may read is still found, not stored
twice; deleting one of two documents of a file keeps the file for the other."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Document, Job, Role
from app.services import access, collections, documents, file_store, jobs, uploads
from app.services.access import Actor
from app.settings import Settings
from tests.app.access_world import NAMES, World, build_world
from tests.app.test_dispatch import make_settings
from tests.pipelines import pdf_factory
from tests.pipelines.echo_model import count_words
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


def _actor(world: World, role: Role) -> Actor:
    return Actor(user_id=world.user_ids[role], name=NAMES[role], role=role)


def _file_of(session: Session, document_id: int, tmp_path: Path, name: str) -> Path:
    """A PDF that the document `document_id` is said to hold (its content hash set to it)."""
    path = pdf_factory.text_pdf(tmp_path, [f"The file of document {document_id}."], name=name)
    session.get(Document, document_id).content_hash = file_store.content_hash_of(path)
    session.commit()
    return path


def _upload(session: Session, settings: Settings, world: World, path: Path, **options):
    edna = _actor(world, Role.EDITOR)
    return uploads.queue_upload(
        session=session,
        settings=settings,
        file_name="same.pdf",
        data=path.read_bytes(),
        summarize=False,
        owner_id=edna.user_id,
        uploader=edna,
        **options,
    )


def test_an_upload_of_a_file_stored_only_out_of_reach_is_answered_as_a_new_file(
    session: Session, settings: Settings, tmp_path: Path
) -> None:
    world = build_world(session)
    in_b = _file_of(session, world.b, tmp_path, "b.pdf")
    in_a = _file_of(session, world.a, tmp_path, "a.pdf")
    new = pdf_factory.text_pdf(tmp_path, ["A file nobody stored."], name="new.pdf")

    hidden = _upload(session, settings, world, in_b)
    fresh = _upload(session, settings, world, new)
    # As for a file never seen: queued, no document named; only the job's id differs.
    assert hidden.present_document_id is None and hidden.refusal is None
    assert hidden.job_id is not None and fresh.job_id is not None
    assert {**vars(hidden), "job_id": 0} == {**vars(fresh), "job_id": 0}
    # A file stored as a document she may read is that document, as before.
    readable = _upload(session, settings, world, in_a, collection_id=world.collection_a)
    assert (readable.present_document_id, readable.job_id) == (world.a, None)


def _run_job(
    sessions: sessionmaker[Session], tmp_path: Path, path: Path, **params
) -> tuple[Job, Document]:
    with sessions() as writing:
        job = jobs.create_ingest_job(
            session=writing,
            params=jobs.IngestParams(file_name=path.name, path=str(path), **params),
        )
        writing.commit()
        job_id = job.id
    runner_ingest.run_ingest(
        job_id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=40),
        count_tokens=count_words,
    )
    with sessions() as check:
        job = check.get(Job, job_id)
        return job, check.get(Document, job.document_id)


def test_the_job_of_such_an_upload_stores_the_uploader_s_own_document(
    sessions: sessionmaker[Session], session: Session, tmp_path: Path
) -> None:
    world = build_world(session)
    path = _file_of(session, world.b, tmp_path, "b.pdf")
    edna = _actor(world, Role.EDITOR)
    matter_b = set(collections.document_ids_of(session=session, collection_id=world.collection_b))

    job, document = _run_job(
        sessions, tmp_path, path, owner_id=edna.user_id, collection_id=world.collection_a
    )
    assert job.stats.get("already_present") is None and document.id != world.b
    assert document.owner_id == edna.user_id and document.num_pages == 1
    with sessions() as check:
        assert access.can_write_document(session=check, actor=edna, document_id=document.id)
        assert not access.can_read_document(session=check, actor=edna, document_id=world.b)
        assert set(
            collections.document_ids_of(session=check, collection_id=world.collection_a)
        ) == {
            world.a,
            document.id,
        }
        assert (
            set(collections.document_ids_of(session=check, collection_id=world.collection_b))
            == matter_b
        )
        assert check.get(Document, world.b).owner_id is None  # b is not claimed either

    # Her second upload of it is her own document, present; the local admin's finds the first.
    again, same = _run_job(sessions, tmp_path, path, owner_id=edna.user_id)
    assert (again.stats.get("already_present"), same.id) == (True, document.id)
    admin, oldest = _run_job(sessions, tmp_path, path)
    assert (admin.stats.get("already_present"), oldest.id) == (True, world.b)


def test_deleting_one_document_of_a_file_keeps_the_file_for_the_other(
    sessions: sessionmaker[Session], session: Session, tmp_path: Path
) -> None:
    world = build_world(session)
    path = _file_of(session, world.b, tmp_path, "b.pdf")
    _, hers = _run_job(sessions, tmp_path, path, owner_id=world.user_ids[Role.EDITOR])
    files_dir = tmp_path / "files"
    stored = files_dir / hers.stored_path if hers.stored_path else None
    assert stored is not None and stored.exists()
    with sessions() as writing:
        writing.get(Document, world.b).stored_path = hers.stored_path  # the same stored file
        writing.commit()
        assert documents.delete_document(session=writing, document_id=hers.id, files_dir=files_dir)
        writing.commit()
    assert stored.exists()  # b still holds it
    with sessions() as writing:
        assert documents.delete_document(session=writing, document_id=world.b, files_dir=files_dir)
        writing.commit()
    assert not stored.exists()  # the last one takes it
