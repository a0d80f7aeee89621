"""The inbox folder: each settled PDF at its top level becomes a queued ingest job; one in a
folder of the inbox goes into the collection of that folder's name (created if new).

The inbox is a folder other people and programs write into, so nothing in it is trusted:

- Never a symbolic link, never outside the folder: entries are examined with lstat, opened with
  O_NOFOLLOW relative to the inbox's own descriptor, and checked again with fstat on what was
  opened (a link swapped in meanwhile fails to open). A link is refused and removed; what it
  points to is never read or touched. A link to a folder is not a collection's folder. Devices, pipes and sockets are refused too.
- Checked before copying: size and header are read from the open file (pipelines.ingest.parse's
  check_open_file, the same rules as an upload), so a 250 MB file is refused without a copy.
- Refused files leave the inbox: a regular file moves to inbox/refused/, a link is deleted, and
  a failed ingest job says why (`longdoc jobs`, the UI), so nothing is retried every scan.
- Accepted files are copied into the document store from the descriptor that was checked, then
  moved to inbox/processed/. Both folders are pruned of entries older than `keep_s` (setting
  LONGDOC_INBOX_KEEP_DAYS), and neither may be a link: one is replaced by a real folder.

A stored copy whose ingest the worker then refuses is removed by worker/ingest/stored_copies.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from sqlalchemy.orm import Session, sessionmaker

from app.display import display_name
from app.errors import AmbiguousCollection, AppError, InvalidCollection, StoredFileError
from app.services import access, accounts, acting, file_store, jobs
from app.services.access import Actor
from pipelines.errors import DocumentError
from pipelines.ingest.limits import ParseLimits, check_open_file
from worker.jobs import ingest as runner_ingest

logger = logging.getLogger(__name__)

PROCESSED_FOLDER = "processed"
REFUSED_FOLDER = "refused"
# A file younger than this may still be being copied into the inbox; the next scan takes it.
MIN_FILE_AGE_S = 5.0
DEFAULT_MAX_BYTES = ParseLimits().max_bytes
DEFAULT_KEEP_S = 30 * 24 * 3600.0
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_LINK = (
    "This inbox entry is a symbolic link. LongDoc ingests only files placed in the inbox "
    "itself and never follows links; the link was removed (what it points to was not touched)."
)
_NOT_A_FILE = "This inbox entry is not a regular file (a device, pipe or socket); it was removed."


def scan_inbox(
    *,
    sessions: sessionmaker[Session],
    inbox_dir: Path,
    files_dir: Path,
    max_bytes: int = DEFAULT_MAX_BYTES,
    keep_s: float = DEFAULT_KEEP_S,
    min_age_s: float = MIN_FILE_AGE_S,
    owner_name: str = "",
) -> list[int]:
    """Queue an ingest job for each settled PDF in the inbox; refuse and record the rest.

    Returns the ids of the queued jobs, committed; the caller sends their tasks.
    """
    if not inbox_dir.is_dir():
        return []
    try:
        owner = _inbox_owner(sessions, owner_name)
    except AppError as error:
        logger.error("inbox not scanned: %s", error)
        return []
    with contextlib.ExitStack() as folders:
        inbox_fd = folders.enter_context(_folder(inbox_dir))
        processed_fd = folders.enter_context(_own_folder(inbox_fd, PROCESSED_FOLDER))
        refused_fd = folders.enter_context(_own_folder(inbox_fd, REFUSED_FOLDER))
        num_pruned = prune(processed_fd, keep_s) + prune(refused_fd, keep_s)
        scans = [
            _Scan(sessions, files_dir, max_bytes, inbox_fd, processed_fd, refused_fd, owner=owner)
        ]
        for name in sorted(entry.name for entry in os.scandir(inbox_fd)):
            if name.lower().endswith(".pdf"):
                scans[0].take(name, min_age_s)
        # A folder of the inbox is a collection: its PDFs go into the collection of that name
        # (created if new). Links to folders are left alone.
        for name in _collection_folders(inbox_fd):
            with _subfolder(inbox_fd, name) as folder_fd:
                if folder_fd is None:
                    continue
                try:
                    collection_id = _collection_for(sessions, owner, name)
                except AmbiguousCollection:
                    logger.warning("inbox folder skipped: several collections have its name")
                    continue
                if not _may_ingest_into(sessions, owner, collection_id):
                    logger.warning("inbox folder skipped: its user may not write its collection")
                    continue
                scan = _Scan(
                    sessions, files_dir, max_bytes, folder_fd, processed_fd, refused_fd,
                    collection_id=collection_id, owner=owner,
                )  # fmt: skip
                for entry in sorted(e.name for e in os.scandir(folder_fd)):
                    if entry.lower().endswith(".pdf"):
                        scan.take(entry, min_age_s)
                scans.append(scan)
    job_ids = [job_id for scan in scans for job_id in scan.job_ids]
    num_refused = sum(scan.num_refused for scan in scans)
    if job_ids or num_refused or num_pruned:
        logger.info(
            "inbox scan: %d queued, %d refused, %d old entries pruned",
            len(job_ids),
            num_refused,
            num_pruned,
        )
    return job_ids


def _collection_folders(inbox_fd: int) -> list[str]:
    own = {PROCESSED_FOLDER, REFUSED_FOLDER}
    names = []
    for entry in os.scandir(inbox_fd):
        if entry.name in own or entry.name.startswith("."):
            continue
        if stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode):
            names.append(entry.name)
    return sorted(names)


@contextlib.contextmanager
def _subfolder(inbox_fd: int, name: str) -> Iterator[int | None]:
    """The folder opened without following a link (None if it is one now, or is gone)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=inbox_fd)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _inbox_owner(sessions: sessionmaker[Session], name: str) -> Actor | None:
    """The user the inbox ingests as; None for "" (no owner). AppError for a user who does not
    exist, is disabled or may not upload: nothing is ingested then, rather than as no one."""
    if not name:
        return None
    with sessions() as session:
        user = accounts.require_user(session=session, name=name)
        owner = accounts.actor_for(user, "inbox")
        if user.is_disabled or not access.can_upload(owner):
            raise accounts.AccountError(
                f"LONGDOC_INBOX_USER {name!r} is disabled or may not upload documents."
            )
        return owner


def _may_ingest_into(
    sessions: sessionmaker[Session], owner: Actor | None, collection_id: int | None
) -> bool:
    if owner is None or collection_id is None:
        return True
    with sessions() as session:
        return access.can_write_collection(
            session=session, actor=owner, collection_id=collection_id
        )


def _collection_for(
    sessions: sessionmaker[Session], owner: Actor | None, folder_name: str
) -> int | None:
    """The id of the collection the folder's name picks among those the inbox's user may read
    (no user: every one), created as theirs if none; None for a folder name that cannot be a
    collection's. AmbiguousCollection when several they may read have the name (a folder
    named "#ID" picks that one)."""
    actor = owner or access.local_admin("inbox")
    with sessions() as session:
        name = display_name(folder_name)
        found = acting.lookup_collection(session=session, actor=actor, name=name)
        if found is not None:
            return found.id
        try:
            created = acting.create_collection(session=session, actor=actor, name=folder_name)
        except InvalidCollection:
            return None
        session.commit()
        logger.info("inbox: new collection %s from a folder", created.id)
        return created.id


def prune(folder_fd: int, keep_s: float) -> int:
    """Delete the files (and links) of a folder older than keep_s; returns how many."""
    cutoff = time.time() - keep_s
    removed = 0
    for entry in os.scandir(folder_fd):
        info = entry.stat(follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode) and info.st_mtime < cutoff:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=folder_fd)  # unlink never follows a link
                removed += 1
    return removed


class _Scan:
    """One pass over the inbox, with the descriptors of its folders."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        files_dir: Path,
        max_bytes: int,
        inbox_fd: int,
        processed_fd: int,
        refused_fd: int,
        *,
        collection_id: int | None = None,
        owner: Actor | None = None,
    ) -> None:
        """`inbox_fd`: the folder scanned (the inbox, or a collection's folder in it); `owner`:
        the user the inbox ingests as (LONGDOC_INBOX_USER), None: no one."""
        self.sessions, self.files_dir = sessions, files_dir
        self.collection_id = collection_id
        self.owner = owner
        self.limits = ParseLimits(max_bytes=max_bytes)
        self.inbox_fd, self.processed_fd, self.refused_fd = inbox_fd, processed_fd, refused_fd
        self.job_ids: list[int] = []
        self.num_refused = 0

    def take(self, name: str, min_age_s: float) -> None:
        try:
            info = os.stat(name, dir_fd=self.inbox_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            return  # a folder that happens to end in .pdf: not ours to touch
        if stat.S_ISLNK(info.st_mode):
            return self._refuse_and_delete(name, "symbolic_link", _LINK)
        if not stat.S_ISREG(info.st_mode):
            return self._refuse_and_delete(name, "not_a_file", _NOT_A_FILE)
        if time.time() - info.st_mtime < min_age_s:
            return
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=self.inbox_fd)
        except FileNotFoundError:
            return
        except OSError:  # ELOOP: a link was swapped in after the lstat
            return self._refuse_and_delete(name, "symbolic_link", _LINK)
        with os.fdopen(fd, "rb") as file:
            self._take_open(name, file)

    def _take_open(self, name: str, file: BinaryIO) -> None:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            return self._refuse_and_delete(name, "not_a_file", _NOT_A_FILE)
        try:
            check_open_file(file, info.st_size, self.limits)
        except DocumentError as error:
            return self._refuse_and_move(name, error.code, error.message)
        file.seek(0)
        content_hash = hashlib.file_digest(file, "sha256").hexdigest()
        file.seek(0)
        try:
            stored = file_store.store_file(
                files_dir=self.files_dir, content_hash=content_hash, data=file
            )
        except StoredFileError:
            logger.info("inbox file changed while it was copied; the next scan takes it")
            return
        with self.sessions() as session:
            params = jobs.IngestParams(
                file_name=display_name(name),
                path=str(stored),
                source="inbox",
                # The document joins it once stored (worker/jobs/ingest.py).
                collection_id=self.collection_id or None,
                owner_id=None if self.owner is None else self.owner.user_id,
            )
            job = jobs.create_ingest_job(session=session, params=params)
            if self.owner is not None:
                access.record_ok(
                    session=session,
                    actor=self.owner,
                    action="upload",
                    target_kind="job",
                    target_ids=[job.id],
                )
            session.commit()
            self.job_ids.append(job.id)
        _move(name, self.inbox_fd, self.processed_fd)

    def _refuse_and_delete(self, name: str, code: str, sentence: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.inbox_fd)
        self._record(name, code, sentence)

    def _refuse_and_move(self, name: str, code: str, sentence: str) -> None:
        _move(name, self.inbox_fd, self.refused_fd)
        self._record(name, code, f"{sentence} The file was moved to the inbox's refused/ folder.")

    def _record(self, name: str, code: str, sentence: str) -> None:
        params = jobs.IngestParams(file_name=display_name(name), source="inbox")
        job_id = runner_ingest.record_refused_file(
            params, sessions=self.sessions, code=code, sentence=sentence
        )
        self.num_refused += 1
        logger.info("inbox entry refused: job %s %s", job_id, code)


@contextlib.contextmanager
def _folder(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _own_folder(inbox_fd: int, name: str) -> Iterator[int]:
    """A real folder `name` inside the inbox (a link there is replaced by one), opened."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, dir_fd=inbox_fd)
    try:
        fd = os.open(name, flags, dir_fd=inbox_fd)
    except OSError:
        info = os.stat(name, dir_fd=inbox_fd, follow_symlinks=False)
        if not stat.S_ISLNK(info.st_mode):
            raise
        logger.warning("inbox/%s was a symbolic link; it is replaced by a folder", name)
        os.unlink(name, dir_fd=inbox_fd)
        os.mkdir(name, dir_fd=inbox_fd)
        fd = os.open(name, flags, dir_fd=inbox_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _move(name: str, from_fd: int, to_fd: int) -> None:
    """Move an inbox entry into a folder under a free name, its mtime set to now (for pruning)."""
    stem, dot, suffix = name.rpartition(".")
    target, counter = name, 1
    while _exists(target, to_fd):
        target = f"{stem}-{counter}{dot}{suffix}"
        counter += 1
    os.rename(name, target, src_dir_fd=from_fd, dst_dir_fd=to_fd)
    os.utime(target, dir_fd=to_fd, follow_symlinks=False)


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
