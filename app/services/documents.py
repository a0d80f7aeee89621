"""Documents, their pages and passages, and the uploaded files behind them.

Functions take a session and flush; the caller commits. "Not found" returns None (or False).
"""

import hashlib
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import Document, DocumentKind, DocumentStatus, Page, Passage
from app.errors import DuplicateDocument, StoredFileError

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_COPY_BLOCK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class NewPage:
    number: int  # 1-based
    text: str


@dataclass(frozen=True)
class NewPassage:
    ordinal: int
    first_page: int
    last_page: int
    start_char: int
    end_char: int
    text: str
    num_tokens: int


@dataclass(frozen=True)
class NewDocument:
    """A parsed document to store. num_pages and num_chars are derived from `pages`."""

    content_hash: str  # sha256 hex of the file, see content_hash_of
    file_name: str
    kind: DocumentKind
    num_tokens: int
    pages: Sequence[NewPage]
    passages: Sequence[NewPassage]
    title: str | None = None
    stored_path: str | None = None  # as returned by store_file, or relative to files_dir

    def __post_init__(self) -> None:
        if not _SHA256_HEX.fullmatch(self.content_hash):
            raise ValueError("content_hash must be 64 lowercase hex digits (sha256)")


def find_by_hash(*, session: Session, content_hash: str) -> Document | None:
    return session.scalars(select(Document).where(Document.content_hash == content_hash)).first()


def store_document(*, session: Session, new: NewDocument) -> Document:
    """Add a ready document with its pages and passages, and flush; the caller commits.

    Raises DuplicateDocument when the content hash is stored already, also when another process
    stored it a moment ago; the session stays usable either way (the insert runs in a savepoint).
    """
    existing = find_by_hash(session=session, content_hash=new.content_hash)
    if existing is not None:
        raise DuplicateDocument(new.content_hash, existing.id)
    document = Document(
        content_hash=new.content_hash,
        file_name=new.file_name,
        title=new.title,
        kind=DocumentKind(new.kind),
        num_pages=len(new.pages),
        num_chars=sum(len(page.text) for page in new.pages),
        num_tokens=new.num_tokens,
        status=DocumentStatus.READY,
        stored_path=new.stored_path,
        pages=[Page(number=page.number, text=page.text) for page in new.pages],
        passages=[
            Passage(
                ordinal=p.ordinal,
                first_page=p.first_page,
                last_page=p.last_page,
                start_char=p.start_char,
                end_char=p.end_char,
                text=p.text,
                num_tokens=p.num_tokens,
            )
            for p in new.passages
        ],
    )
    try:
        with session.begin_nested():
            session.add(document)
    except IntegrityError:
        raced = find_by_hash(session=session, content_hash=new.content_hash)
        if raced is None:
            raise  # another constraint: a bug in the caller's pages or passages
        raise DuplicateDocument(new.content_hash, raced.id) from None
    return document


def list_documents(
    *,
    session: Session,
    kind: DocumentKind | None = None,
    status: DocumentStatus | None = None,
    title_query: str | None = None,
) -> list[Document]:
    """Newest first. `title_query` matches title or file name, case-insensitively, literally."""
    query = select(Document).order_by(Document.created_at.desc(), Document.id.desc())
    if kind is not None:
        query = query.where(Document.kind == kind)
    if status is not None:
        query = query.where(Document.status == status)
    if title_query:
        query = query.where(
            or_(
                Document.title.icontains(title_query, autoescape=True),
                Document.file_name.icontains(title_query, autoescape=True),
            )
        )
    return list(session.scalars(query))


def get_document(*, session: Session, document_id: int) -> Document | None:
    return session.get(Document, document_id)


def get_pages(*, session: Session, document_id: int, number: int | None = None) -> list[Page]:
    """The document's pages in order, or only page `number`; [] when there is none."""
    query = select(Page).where(Page.document_id == document_id).order_by(Page.number)
    if number is not None:
        query = query.where(Page.number == number)
    return list(session.scalars(query))


def get_passages(
    *,
    session: Session,
    document_id: int,
    passage_ids: Sequence[int] | None = None,
    page_number: int | None = None,
) -> list[Passage]:
    """The document's passages in order; only those in `passage_ids` and/or overlapping
    `page_number` when given. Ids of other documents' passages are ignored."""
    query = select(Passage).where(Passage.document_id == document_id).order_by(Passage.ordinal)
    if passage_ids is not None:
        query = query.where(Passage.id.in_(passage_ids))
    if page_number is not None:
        query = query.where(Passage.first_page <= page_number, Passage.last_page >= page_number)
    return list(session.scalars(query))


def delete_document(*, session: Session, document_id: int, files_dir: Path) -> bool:
    """Delete the document and, by cascade, its pages, passages, jobs, summaries and answers.

    Its stored file is removed too when it lies inside `files_dir` (a path elsewhere is never
    touched). Flushes; the caller commits. False when there is no such document.
    """
    document = session.get(Document, document_id)
    if document is None:
        return False
    stored_path = document.stored_path
    session.delete(document)
    session.flush()
    if stored_path:
        path = (files_dir / stored_path).resolve()
        if path.is_relative_to(files_dir.resolve()):
            path.unlink(missing_ok=True)
    return True


def content_hash_of(path: Path) -> str:
    """sha256 hex of a file, read in blocks (uploads may be hundreds of MiB)."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def store_file(*, files_dir: Path, content_hash: str, data: bytes | Path) -> Path:
    """Store an uploaded file as files_dir/<hash[:2]>/<hash>.pdf and return that path.

    The write is atomic (temporary file, then rename), so a reader never sees half a file; the
    content is checked against `content_hash` on the way. Storing the same content twice is a
    no-op that returns the same path.
    """
    if not _SHA256_HEX.fullmatch(content_hash):
        raise ValueError("content_hash must be 64 lowercase hex digits (sha256)")
    shard = files_dir / content_hash[:2]
    target = shard / f"{content_hash}.pdf"
    if target.exists():
        return target
    shard.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=shard, prefix=".upload-", suffix=".part")
    temp_path = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as out:
            digest = _copy_and_hash(data, out)
            out.flush()
            os.fsync(out.fileno())
        if digest != content_hash:
            raise StoredFileError(
                f"The uploaded file changed while it was stored (expected content hash "
                f"{content_hash[:12]}…, got {digest[:12]}…); upload it again."
            )
        os.replace(temp_path, target)
    finally:
        temp_path.unlink(missing_ok=True)
    return target


def _copy_and_hash(data: bytes | Path, out: BinaryIO) -> str:
    if isinstance(data, bytes):
        out.write(data)
        return hashlib.sha256(data).hexdigest()
    hasher = hashlib.sha256()
    with data.open("rb") as source:
        while block := source.read(_COPY_BLOCK_BYTES):
            hasher.update(block)
            out.write(block)
    return hasher.hexdigest()
