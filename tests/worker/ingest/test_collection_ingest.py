"""Uploads into a collection (params["collection_id"] on the ingest job): the stored document,
or the one already present, joins the collection once ingested; a collection deleted meanwhile
is no error. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from app.db.models import Job, JobKind, JobStatus
from app.services import collections, jobs
from tests.pipelines import pdf_factory
from tests.pipelines.echo_model import count_words
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest

PAGES = ["Lease.\nThe tenant pays 900 dollars.", "Neither party may assign it without consent."]


def _ingest(sessions, tmp_path: Path, collection_id: int, name: str = "lease.pdf") -> Job:
    path = tmp_path / name
    if not path.exists():
        path = pdf_factory.text_pdf(tmp_path, PAGES, name=name)
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": name, "collection_id": collection_id},
        )
        session.commit()
    runner_ingest.run_ingest(
        job.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=40),
        count_tokens=count_words,
    )
    with sessions() as session:
        return session.get(Job, job.id)


def test_an_upload_into_a_collection_joins_it_also_when_already_present(sessions, tmp_path):
    with sessions() as session:
        matter = collections.create_collection(session=session, name="Matter")
        other = collections.create_collection(session=session, name="Other")
        session.commit()
    first = _ingest(sessions, tmp_path, matter.id)
    assert first.status == JobStatus.SUCCEEDED and first.document_id is not None
    again = _ingest(sessions, tmp_path, other.id)  # the same file again: already present
    assert again.document_id == first.document_id
    with sessions() as session:
        assert collections.document_ids_of(session=session, collection_id=matter.id) == [
            first.document_id
        ]
        assert collections.document_ids_of(session=session, collection_id=other.id) == [
            first.document_id
        ]
        # Searchable at once: the triggers (SQLite) or the generated column (PostgreSQL).
        from app.services.search import SearchFilters, search_passages

        (hit,) = search_passages(
            session=session, query="assign consent", filters=SearchFilters(collection_id=matter.id)
        )
        assert (hit.document_id, hit.page) == (first.document_id, 2)


def test_a_collection_deleted_before_the_ingest_ends_is_no_error(sessions, tmp_path):
    with sessions() as session:
        gone = collections.create_collection(session=session, name="Gone")
        session.commit()
        collections.delete_collection(session=session, collection_id=gone.id)
        session.commit()
    job = _ingest(sessions, tmp_path, gone.id)
    assert job.status == JobStatus.SUCCEEDED
