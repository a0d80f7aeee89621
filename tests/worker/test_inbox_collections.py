"""A folder of the inbox is a collection: its PDFs are queued for that collection (created if
new) and join it once ingested; a link to a folder is not followed."""

from __future__ import annotations

import os
from pathlib import Path

from app.db.models import Job
from app.services import collections
from tests.pipelines import pdf_factory
from tests.pipelines.echo_model import count_words
from tests.worker.test_inbox import settle
from worker.inbox import scan_inbox
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest

LEASE = [
    "Lease.\nThe tenant pays 900 dollars each month to the landlord.",
    "Either party may end it with three months written notice.",
]


def test_a_folder_of_the_inbox_fills_its_collection(sessions, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    (inbox / "Matter 7").mkdir(parents=True)
    pdf = pdf_factory.text_pdf(inbox / "Matter 7", LEASE, name="a.pdf")
    outside = tmp_path / "outside"
    outside.mkdir()
    pdf_factory.text_pdf(outside, ["Not for the inbox."], name="b.pdf")
    os.symlink(outside, inbox / "Linked")
    settle(pdf, inbox / "Linked")
    files_dir = tmp_path / "files"

    (job_id,) = scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=files_dir)

    with sessions() as session:
        matter = collections.find_collection(session=session, name="Matter 7")
        assert matter is not None
        assert collections.find_collection(session=session, name="Linked") is None
        assert session.get(Job, job_id).params["collection_id"] == matter.id
    assert not pdf.exists() and (inbox / "processed" / "a.pdf").exists()
    assert (outside / "b.pdf").exists()  # the linked folder was not read
    runner_ingest.run_ingest(
        job_id,
        sessions=sessions,
        options=IngestOptions(files_dir=files_dir, passage_max_tokens=40),
        count_tokens=count_words,
    )
    with sessions() as session:
        ingested = session.get(Job, job_id)
        assert ingested.status == "succeeded", ingested.error
        document_id = ingested.document_id
        assert collections.document_ids_of(session=session, collection_id=matter.id) == [
            document_id
        ]
