"""The uploaded files' store (app/services/file_store.py): content-addressed, atomic, checked."""

import hashlib
from pathlib import Path

import pytest

from app.errors import StoredFileError
from app.services import file_store


def test_store_file_is_sharded_checked_and_idempotent(tmp_path: Path) -> None:
    data = b"%PDF-1.7 fake"
    content_hash = hashlib.sha256(data).hexdigest()
    files_dir = tmp_path / "files"
    path = file_store.store_file(files_dir=files_dir, content_hash=content_hash, data=data)
    assert path == files_dir / content_hash[:2] / f"{content_hash}.pdf"
    assert path.read_bytes() == data
    assert file_store.content_hash_of(path) == content_hash

    source = tmp_path / "upload.pdf"
    source.write_bytes(data)
    assert (
        file_store.store_file(files_dir=files_dir, content_hash=content_hash, data=source) == path
    )
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary left


def test_store_file_refuses_content_that_does_not_match_its_hash(tmp_path: Path) -> None:
    source = tmp_path / "upload.pdf"
    source.write_bytes(b"actual bytes")
    claimed = hashlib.sha256(b"other bytes").hexdigest()
    with pytest.raises(StoredFileError):
        file_store.store_file(files_dir=tmp_path / "files", content_hash=claimed, data=source)
    assert list((tmp_path / "files").rglob("*")) == [tmp_path / "files" / claimed[:2]]


def test_remove_file_never_leaves_the_files_folder(tmp_path: Path) -> None:
    files_dir = tmp_path / "files"
    data = b"%PDF-1.7 stored"
    stored = file_store.store_file(
        files_dir=files_dir, content_hash=hashlib.sha256(data).hexdigest(), data=data
    )
    outside = tmp_path / "elsewhere.pdf"
    outside.write_bytes(b"not ours")
    file_store.remove_file(files_dir=files_dir, stored_path=Path("..") / outside.name)
    assert outside.exists()
    file_store.remove_file(files_dir=files_dir, stored_path=stored.relative_to(files_dir))
    assert not stored.exists()
    file_store.remove_file(files_dir=files_dir, stored_path=stored.relative_to(files_dir))


def test_content_hash_is_64_lowercase_hex_digits() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    assert file_store.is_content_hash(digest)
    assert not file_store.is_content_hash(digest.upper())
    assert not file_store.is_content_hash(digest[:-1])
