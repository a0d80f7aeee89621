"""Ingestion: a PDF on disk becomes a stored document with its pages and passages.

Parsing and splitting come from `pipelines`, storage from `app`; this module only wires them and
keeps a job row per file, so a refusal is recorded with its sentence as well as shown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import DocumentKind, JobKind
from app.errors import DuplicateDocument
from app.services import documents, jobs
from pipelines.classify import guess_kind
from pipelines.documents import ParsedDocument, Passage, document_text
from pipelines.errors import DocumentError
from pipelines.parse import ParseLimits, check_file, parse_pdf
from pipelines.protocols import TokenCounter
from pipelines.split import split_into_passages

logger = logging.getLogger(__name__)

STORED, PRESENT, REFUSED = "stored", "present", "refused"
KINDS = ("auto", "legal", "medical", "other")
_UNEXPECTED = "An unexpected error stopped LongDoc from reading this file; nothing was stored."


@dataclass(frozen=True)
class IngestOptions:
    files_dir: Path
    limits: ParseLimits = field(default_factory=ParseLimits)
    passage_max_tokens: int = 384
    password: str | None = None
    kind: str = "auto"  # one of KINDS

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")


@dataclass(frozen=True)
class IngestOutcome:
    path: Path
    status: str  # STORED, PRESENT or REFUSED
    document_id: int | None = None
    job_id: int | None = None
    error_code: str | None = None
    reason: str | None = None  # the sentence shown to people when refused
    num_pages: int = 0
    num_passages: int = 0
    stats: dict = field(default_factory=dict)
    follow_up_job_id: int | None = None  # the summarize job created with the document


Progress = Callable[[str], None]  # called with the stage name: hashing, parsing, splitting, storing


def pdf_paths(targets: Iterable[Path]) -> Iterator[Path]:
    """Files as given, and the PDFs inside folders (recursively, sorted). Other files inside
    folders are skipped; a file named explicitly is always tried, whatever its name."""
    for target in targets:
        if target.is_dir():
            yield from sorted(p for p in target.rglob("*") if p.is_file() and _is_pdf_name(p))
        else:
            yield target


def _is_pdf_name(path: Path) -> bool:
    return path.suffix.lower() == ".pdf"


def ingest_file(
    path: Path,
    *,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    on_stage: Progress | None = None,
) -> IngestOutcome:
    """Store one PDF, or say why not. Never raises for a bad document; database errors propagate."""
    with sessions() as session:
        job = jobs.create_job(session=session, kind=JobKind.INGEST, params={"file_name": path.name})
        jobs.start_job(session=session, job_id=job.id)
        session.commit()
        job_id = job.id
    try:
        return ingest_into_job(
            path,
            job_id,
            sessions=sessions,
            options=options,
            count_tokens=count_tokens,
            on_stage=on_stage,
        )
    except DocumentError as error:
        return _refuse(path, job_id, sessions, error.code, error.message)
    except OSError as error:
        sentence = f"LongDoc cannot read this file ({error.strerror or type(error).__name__})."
        return _refuse(path, job_id, sessions, "unreadable_file", sentence)
    except Exception:
        # The type and the job id go to the log, never the exception text: it may quote the document.
        logger.error("ingest job %s failed unexpectedly", job_id, exc_info=False)
        logger.debug("ingest job %s traceback", job_id, exc_info=True)
        return _refuse(path, job_id, sessions, "internal_error", _UNEXPECTED)


def ingest_into_job(
    path: Path,
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    on_stage: Progress | None = None,
    file_name: str | None = None,
    then_summarize: bool = False,
) -> IngestOutcome:
    """Store one PDF for an existing, started job and finish the job. Raises DocumentError or
    OSError for the caller to record. `file_name` names the document when `path` is a stored copy
    (the document store names its files by content hash). With `then_summarize`, a summarize
    job for the document is created in the transaction that finishes this one, so no reader
    ever sees the ingest job done without its follow-up."""
    stage = on_stage or (lambda _: None)
    file_name = file_name or path.name
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[f"{name}_seconds"] = round(now - clock, 4)
        clock = now

    check_file(path, options.limits)  # size and header before reading the whole file
    stage("hashing")
    content_hash = documents.content_hash_of(path)
    lap("hash")
    with sessions() as session:
        existing = documents.find_by_hash(session=session, content_hash=content_hash)
        if existing is not None:
            return _present(path, job_id, existing.id, existing.num_pages, session, then_summarize)

    stage("parsing")
    parsed = parse_pdf(path, password=options.password, limits=options.limits)
    lap("parse")
    stage("splitting")
    passages = split_into_passages(
        parsed.pages, count_tokens=count_tokens, max_tokens=options.passage_max_tokens
    )
    (num_tokens,) = count_tokens([document_text(parsed.pages)])
    kind = guess_kind(parsed.pages) if options.kind == "auto" else options.kind
    lap("split")

    stage("storing")
    stored_path = documents.store_file(
        files_dir=options.files_dir, content_hash=content_hash, data=path
    )
    new = _new_document(file_name, content_hash, kind, num_tokens, parsed, passages, stored_path)
    with sessions() as session:
        try:
            document = documents.store_document(session=session, new=new)
        except DuplicateDocument as duplicate:
            # Another process stored the same file while we parsed it.
            return _present(
                path, job_id, duplicate.document_id, parsed.num_pages, session, then_summarize
            )
        lap("store")
        stats = {
            **timings,
            "num_pages": parsed.num_pages,
            "num_chars": parsed.num_chars,
            "num_tokens": num_tokens,
            "num_passages": len(passages),
            "kind": kind,
        }
        stats = _finish(session, job_id, stats, document.id, then_summarize)
        return IngestOutcome(
            path=path,
            status=STORED,
            document_id=document.id,
            job_id=job_id,
            num_pages=parsed.num_pages,
            num_passages=len(passages),
            stats=stats,
            follow_up_job_id=stats.get("follow_up_job_id"),
        )


def _finish(
    session: Session, job_id: int, stats: dict, document_id: int, then_summarize: bool
) -> dict:
    """Finish the ingest job (and create its summarize follow-up) in one commit; its stats."""
    if then_summarize:
        follow_up = jobs.create_job(
            session=session, kind=JobKind.SUMMARIZE, document_id=document_id
        )
        stats = {**stats, "follow_up_job_id": follow_up.id}
    jobs.finish_job(session=session, job_id=job_id, stats=stats, document_id=document_id)
    session.commit()
    return stats


def _new_document(
    file_name: str,
    content_hash: str,
    kind: str,
    num_tokens: int,
    parsed: ParsedDocument,
    passages: list[Passage],
    stored_path: Path,
) -> documents.NewDocument:
    return documents.NewDocument(
        content_hash=content_hash,
        file_name=file_name,
        title=parsed.title,
        kind=DocumentKind(kind),
        num_tokens=num_tokens,
        pages=[documents.NewPage(number=p.number, text=p.text) for p in parsed.pages],
        passages=[
            documents.NewPassage(
                ordinal=p.ordinal,
                first_page=p.first_page,
                last_page=p.last_page,
                start_char=p.start_char,
                end_char=p.end_char,
                text=p.text,
                num_tokens=p.num_tokens,
            )
            for p in passages
        ],
        stored_path=str(stored_path),
    )


def _present(
    path: Path,
    job_id: int,
    document_id: int,
    num_pages: int,
    session: Session,
    then_summarize: bool,
) -> IngestOutcome:
    stats = _finish(session, job_id, {"already_present": True}, document_id, then_summarize)
    return IngestOutcome(
        path=path,
        status=PRESENT,
        document_id=document_id,
        job_id=job_id,
        num_pages=num_pages,
        stats=stats,
        follow_up_job_id=stats.get("follow_up_job_id"),
    )


def _refuse(
    path: Path, job_id: int, sessions: sessionmaker[Session], code: str, sentence: str
) -> IngestOutcome:
    with sessions() as session:
        jobs.fail_job(session=session, job_id=job_id, error_code=code, sentence=sentence)
        session.commit()
    return IngestOutcome(path=path, status=REFUSED, job_id=job_id, error_code=code, reason=sentence)
