"""An upload from the web page: check, de-duplicate, store and queue one file as an ingest job.

A file refused by the quick check (app.services.upload_check: not a PDF, too large, a password
needed or wrong) gets its sentence and no job. A file already in the library as a document the
uploader may read gets no job: it joins the chosen collection and the page links to it. Any other is copied into the document
store and queued (app.services.dispatch.submit_job, which commits); its password is kept on the
job, for the worker, only when the file is encrypted. Nothing here logs the password or the text.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.db.models import JobKind
from app.display import display_name
from app.services import access, collections, dispatch, documents, file_store, jobs
from app.services.access import Actor
from app.services.upload_check import check_upload
from app.settings import Settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadResult:
    """What became of one uploaded file: queued, already in the library, or refused."""

    file_name: str  # as shown to people (upload_name)
    job_id: int | None = None  # the queued ingest job
    present_document_id: int | None = None  # the document it already is: no job
    refusal: str | None = None  # why it was not queued, a sentence for people


def upload_name(name: str) -> str:
    """The name an uploaded file is shown and stored by: no control or bidi characters."""
    return display_name(name) or "unnamed.pdf"


def queue_upload(
    *,
    session: Session,
    settings: Settings,
    file_name: str,
    data: bytes,
    kind: str = "auto",
    password: str = "",
    summarize: bool = True,
    collection_id: int | None = None,
    owner_id: int | None = None,
    uploader: Actor | None = None,
) -> UploadResult:
    """Check, store and queue one uploaded file (see the module docstring). `kind` is "auto"
    (guessed from the text) or a DocumentKind value. Raises AppError, e.g. BrokerUnavailable
    when the queue cannot be reached (the job is then failed with that sentence).

    `uploader` (None: the local admin): a file already stored only as documents they may not
    read is queued as a new file, their own document (migration 0015), and answered exactly
    as one: the upload tells nobody that the file is stored elsewhere, nor its id."""
    name = upload_name(file_name)
    check = check_upload(
        data, password=password or None, max_bytes=settings.max_upload_bytes, file_name=name
    )
    if not check.is_ok:
        logger.info("upload refused before queueing: %s (%d bytes)", check.error_code, len(data))
        return UploadResult(file_name=name, refusal=check.sentence)
    content_hash = hashlib.sha256(data).hexdigest()
    readable = None if uploader is None else access.readable_condition(uploader)
    existing = documents.find_by_hash(session=session, content_hash=content_hash, readable=readable)
    if existing is not None:
        if collection_id is not None:
            collections.add_documents(
                session=session, collection_id=collection_id, document_ids=[existing.id]
            )
            session.commit()
        return UploadResult(file_name=name, present_document_id=existing.id)
    stored = file_store.store_file(
        files_dir=settings.files_dir, content_hash=content_hash, data=data
    )
    params = jobs.IngestParams(
        file_name=name,
        path=str(stored),
        source="upload",
        kind=None if kind == "auto" else kind,
        # The worker reads it from the job (worker/jobs/ingest.py); only encrypted files get it.
        password=password if check.is_encrypted and password else None,
        then_summarize=summarize,
        collection_id=collection_id,  # joined once stored (worker/jobs/ingest.py)
        owner_id=owner_id,  # accounts: the uploader owns what is newly stored
    )
    job = dispatch.submit_job(
        settings=settings, session=session, kind=JobKind.INGEST, params=params.to_dict()
    )
    logger.info("upload queued as job %s (%d bytes)", job.id, len(data))
    return UploadResult(file_name=name, job_id=job.id)
