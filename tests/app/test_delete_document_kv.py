"""Deleting a document deletes its KV blocks in the engine's disk tier (app/kv_cache_files.py)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from app.kv_cache_files import document_cache_tag
from app.services import documents
from tests.app.new_documents import new_document


def test_deleting_a_document_deletes_its_kv_files_and_leaves_a_tombstone(
    session: Session, tmp_path: Path
) -> None:
    document = documents.store_document(session=session, new=new_document("kv"))
    session.commit()
    kv_dir = tmp_path / "kv_cache"
    block = kv_dir / ("a" * 32) / "0f" / "0f00000000000001.kv"
    block.parent.mkdir(parents=True)
    block.write_bytes(b"LDKV")
    other = kv_dir / ("a" * 32) / "0f" / "0f00000000000002.kv"
    other.write_bytes(b"LDKV")
    tag = document_cache_tag(document.id)
    (kv_dir / "tags").mkdir()
    (kv_dir / "tags" / f"{tag}.list").write_text(f"{block.relative_to(kv_dir)}\n../escape.kv\n")

    assert documents.delete_document(
        session=session, document_id=document.id, files_dir=tmp_path / "files", kv_cache_dir=kv_dir
    )
    session.commit()
    assert not block.exists() and other.exists()
    assert not (kv_dir / "tags" / f"{tag}.list").exists()
    assert (kv_dir / "forgotten" / tag).read_text().endswith("done\n")
