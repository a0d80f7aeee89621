"""Ingestion: a PDF on disk becomes a stored document with its pages and passages.

Parsing and splitting come from `pipelines`, storage from `app`; this module only wires them, in
two steps: `read_pdf` (hash, parse, split, embed; it writes nothing) and `store_read` (the file
into the document store, the rows into the caller's session, flushed, not committed). The job
rows are worker/jobs/ingest.py's: it finishes the ingest job in the commit that stores the
document. A file LongDoc cannot take raises DocumentError with its sentence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlalchemy import ColumnElement
from sqlalchemy.orm import Session, sessionmaker

from app.db.session import write_transaction
from app.errors import DuplicateDocument
from app.services import documents, file_store
from app.settings import Settings
from pipelines import kinds as pipelines_kinds
from pipelines.documents import ParsedDocument, Passage, document_text
from pipelines.errors import DocumentError
from pipelines.ingest.classify import guess_kind
from pipelines.ingest.first_page_title import first_page_title
from pipelines.ingest.limits import ParseLimits, check_file
from pipelines.ingest.page_sources import SourceOptions
from pipelines.ingest.parse import parse_pdf_outcome
from pipelines.ingest.split import split_into_passages
from pipelines.protocols import Embedder, TokenCounter
from worker.ingest.records import new_document, source_stats, stored_notice
from worker.model.vector_store import embed_passages, to_bytes

# What became of a file: a new document, one stored before, or not taken (with its sentence).
STORED, PRESENT, REFUSED = "stored", "present", "refused"
# "auto": guessed from the text (pipelines/ingest/classify.py).
KINDS = ("auto", *pipelines_kinds.KINDS)


class UnreadableFile(DocumentError):
    """The file could not be read (or its copy written): an OSError, named in the sentence."""

    code = "unreadable_file"

    def __init__(self, error: OSError) -> None:
        super().__init__(
            f"LongDoc cannot read this file ({error.strerror or type(error).__name__})."
        )


@dataclass(frozen=True)
class IngestOptions:
    files_dir: Path
    limits: ParseLimits = field(default_factory=ParseLimits)
    passage_max_tokens: int = 384
    password: str | None = None
    kind: str = "auto"  # one of KINDS
    key_facts: bool = True  # a key-facts job follows a newly stored document (settings)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")

    @classmethod
    def from_settings(cls, settings: Settings) -> IngestOptions:
        """The options every ingest starts from; a job or a command sets only the file's kind
        and password (`for_file`)."""
        return cls(
            files_dir=settings.files_dir,
            limits=ParseLimits(
                max_bytes=settings.max_upload_bytes,
                max_pages=settings.max_pages,
                timeout_s=settings.parse_timeout_s,
                max_memory_mb=settings.parse_memory_mb,
                max_page_chars=settings.max_page_chars,
                max_document_chars=settings.max_document_chars,
                sources=SourceOptions(
                    ocr_enabled=settings.ocr_enabled,
                    ocr_dpi=settings.ocr_dpi,
                    ocr_page_timeout_s=settings.ocr_page_timeout_s,
                    ocr_num_threads=settings.ocr_num_threads,
                    check_redactions=settings.redaction_check_enabled,
                    keep_hidden_text=settings.keep_hidden_text,
                ),
            ),
            passage_max_tokens=settings.passage_max_tokens,
            key_facts=settings.key_facts_after_ingest,
        )

    def for_file(self, *, kind: str | None = None, password: str | None = None) -> IngestOptions:
        """These options with a file's own kind and password, where it has them."""
        return replace(self, kind=kind or self.kind, password=password or self.password)


@dataclass(frozen=True)
class StoredDocument:
    """What ingest made of one file: a new document (STORED) or the one it already was."""

    status: str  # STORED or PRESENT
    document_id: int
    num_pages: int
    num_passages: int = 0
    stats: dict = field(default_factory=dict)  # for the job: timings and counts, no text
    notice: str | None = None  # stored, but with something the user should know (pages lost)
    num_ocr_pages: int = 0
    num_redactions: int = 0  # boxes that hide text still in the file


@dataclass(frozen=True)
class ReadPdf:
    """A file hashed, parsed, split and (with an embedder) embedded, not stored yet."""

    path: Path
    file_name: str
    content_hash: str
    kind: str
    num_tokens: int
    parsed: ParsedDocument
    failed_pages: tuple[int, ...]
    passages: list[Passage]
    vectors: list[bytes | None]
    embedding_model: str | None
    timings: dict[str, float]


# Called with the stage name: hashing, parsing, "ocr page 3 of 11" (for each page OCR reads),
# splitting, embedding (with an embedder), storing.
Progress = Callable[[str], None]


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


def read_pdf(
    path: Path,
    *,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    on_stage: Progress | None = None,
    file_name: str | None = None,
    embedder: Embedder | None = None,
    readable: ColumnElement[bool] | None = None,
) -> ReadPdf | StoredDocument:
    """Read one PDF for `store_read`; a file stored before as a document that `readable` allows
    (app.services.access.readable_condition; None: any) is not parsed again: its document comes
    back as PRESENT. Raises DocumentError (UnreadableFile for an OSError). `file_name` names the
    document when `path` is a stored copy (the document store names its files by content hash).
    With an `embedder`, the passages get their vectors (stage "embedding")."""
    try:
        return _read(path, sessions, options, count_tokens, on_stage, file_name, embedder, readable)
    except OSError as error:
        raise UnreadableFile(error) from None


def _read(
    path: Path,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    on_stage: Progress | None,
    file_name: str | None,
    embedder: Embedder | None,
    readable: ColumnElement[bool] | None,
) -> ReadPdf | StoredDocument:
    stage = on_stage or (lambda _: None)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[f"{name}_seconds"] = round(now - clock, 4)
        clock = now

    check_file(path, options.limits)  # size and header before reading the whole file
    stage("hashing")
    content_hash = file_store.content_hash_of(path)
    lap("hash")
    with sessions() as session:
        existing = documents.find_by_hash(
            session=session, content_hash=content_hash, readable=readable
        )
        if existing is not None:
            return _present(existing.id, existing.num_pages)

    stage("parsing")

    def on_ocr_page(done: int, total: int) -> None:
        if done < total:
            stage(f"ocr page {done + 1} of {total}")

    parse_outcome = parse_pdf_outcome(
        path, password=options.password, limits=options.limits, on_ocr_page=on_ocr_page
    )
    parsed = parse_outcome.document
    lap("parse")
    stage("splitting")
    passages = split_into_passages(
        parsed.pages, count_tokens=count_tokens, max_tokens=options.passage_max_tokens
    )
    (num_tokens,) = count_tokens([document_text(parsed.pages)])
    kind = guess_kind(parsed.pages) if options.kind == "auto" else options.kind
    if parsed.title is None and kind == pipelines_kinds.LEGAL and parsed.pages:
        # No title in the metadata: an opinion's caption or a contract's title line.
        parsed = replace(parsed, title=first_page_title(parsed.pages[0].text))
    lap("split")
    vectors: list[bytes | None] = [None] * len(passages)
    if embedder is not None:
        stage("embedding")
        groups = embed_passages(embedder, [p.text for p in passages])
        vectors = [to_bytes(group) for group in groups]
        lap("embed")
    return ReadPdf(
        path=path,
        file_name=file_name or path.name,
        content_hash=content_hash,
        kind=kind,
        num_tokens=num_tokens,
        parsed=parsed,
        failed_pages=tuple(parse_outcome.failed_pages),
        passages=passages,
        vectors=vectors,
        embedding_model=embedder.name if embedder is not None else None,
        timings=timings,
    )


def store_read(
    session: Session,
    read: ReadPdf,
    *,
    files_dir: Path,
    on_stage: Progress | None = None,
    readable: ColumnElement[bool] | None = None,
) -> StoredDocument:
    """The file into the document store and its document into `session` (flushed; the caller
    commits, with its job row), in a write transaction (app.db.session.write_transaction, begun
    once the file is copied). PRESENT when another process stored the same file meanwhile."""
    (on_stage or (lambda _: None))("storing")
    started = time.perf_counter()
    parsed = read.parsed
    try:
        stored_path = file_store.store_file(
            files_dir=files_dir, content_hash=read.content_hash, data=read.path
        )
    except OSError as error:
        raise UnreadableFile(error) from None
    new = new_document(
        read.file_name,
        read.content_hash,
        read.kind,
        read.num_tokens,
        parsed,
        list(zip(read.passages, read.vectors, strict=True)),
        stored_path,
        read.embedding_model,
    )
    # A read (is it there already?) then writes: BEGIN IMMEDIATE on SQLite, as results are
    # saved, so it waits for the write lock rather than failing with "database is locked".
    write_transaction(session)
    try:
        document = documents.store_document(session=session, new=new, readable=readable)
    except DuplicateDocument as duplicate:
        # Another process stored the same file while we parsed it.
        return _present(duplicate.document_id, parsed.num_pages)
    stats = {
        **read.timings,
        "store_seconds": round(time.perf_counter() - started, 4),
        "num_pages": parsed.num_pages,
        "num_chars": parsed.num_chars,
        "num_tokens": read.num_tokens,
        "num_passages": len(read.passages),
        "kind": read.kind,
        "embedding_model": read.embedding_model,
        **source_stats(parsed),
    }
    if read.failed_pages:
        stats["failed_pages"] = list(read.failed_pages)
    notice = stored_notice(parsed, read.failed_pages)
    if notice is not None:
        stats["notice"] = notice
    return StoredDocument(
        status=STORED,
        document_id=document.id,
        num_pages=parsed.num_pages,
        num_passages=len(read.passages),
        stats=stats,
        notice=notice,
        num_ocr_pages=len(parsed.ocr_pages),
        num_redactions=len(parsed.redactions),
    )


def _present(document_id: int, num_pages: int) -> StoredDocument:
    return StoredDocument(
        status=PRESENT,
        document_id=document_id,
        num_pages=num_pages,
        stats={"already_present": True},
    )
