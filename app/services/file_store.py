"""The uploaded files: content-addressed under the files folder (files_dir/<hash[:2]>/<hash>.pdf),
written atomically and checked against their sha256 on the way in; a document's row names its
file by that path (app/services/documents.py)."""

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import BinaryIO

from app.errors import StoredFileError

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_COPY_BLOCK_BYTES = 1024 * 1024


def is_content_hash(value: str) -> bool:
    """Whether `value` is a content hash as stored: 64 lowercase hex digits (sha256)."""
    return _SHA256_HEX.fullmatch(value) is not None


def content_hash_of(path: Path) -> str:
    """sha256 hex of a file, read in blocks (uploads may be hundreds of MiB)."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def store_file(*, files_dir: Path, content_hash: str, data: bytes | Path | BinaryIO) -> Path:
    """Store an uploaded file as files_dir/<hash[:2]>/<hash>.pdf and return that path.

    `data` is the content, a path, or a binary file open at its start (the inbox passes the file
    it opened without following symlinks, so what is stored is what it checked).

    The write is atomic (temporary file, then rename), so a reader never sees half a file; the
    content is checked against `content_hash` on the way. Storing the same content twice is a
    no-op that returns the same path.
    """
    if not is_content_hash(content_hash):
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


def _copy_and_hash(data: bytes | Path | BinaryIO, out: BinaryIO) -> str:
    if isinstance(data, bytes):
        out.write(data)
        return hashlib.sha256(data).hexdigest()
    if isinstance(data, Path):
        with data.open("rb") as source:
            return _copy_blocks(source, out)
    return _copy_blocks(data, out)


def _copy_blocks(source: BinaryIO, out: BinaryIO) -> str:
    hasher = hashlib.sha256()
    while block := source.read(_COPY_BLOCK_BYTES):
        hasher.update(block)
        out.write(block)
    return hasher.hexdigest()


def remove_file(*, files_dir: Path, stored_path: str | Path) -> None:
    """Delete a stored file, given its path relative to files_dir; a path that leads outside
    files_dir is never touched, and a file already gone is fine."""
    path = (files_dir / stored_path).resolve()
    if path.is_relative_to(files_dir.resolve()):
        path.unlink(missing_ok=True)
