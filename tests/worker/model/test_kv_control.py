"""A model task first drops the KV of the documents its process served that were deleted since:
what a worker that missed the delete's broadcast (or a prefork child) still held goes then."""

from __future__ import annotations

import time

from app.db.session import session_factory
from app.services import documents
from app.settings import Settings
from tests.app.new_documents import new_document
from tests.engine.conftest import save_tiny_model
from worker.model import engine_holder, kv_control

WAIT_S = 10.0


def _cpu_blocks() -> int:
    sizes = engine_holder.kv_tier_sizes()
    assert sizes is not None
    return sizes["num_cpu_blocks"]


def test_the_kv_of_documents_deleted_meanwhile_is_dropped_before_a_task(session, tmp_path) -> None:
    save_tiny_model(tmp_path / "model", "llama")
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        model=str(tmp_path / "model"),
        engine_device="cpu",
        engine_attention_backend="sdpa",
        engine_max_kv_cache_bytes=4 << 20,
        kv_disk_tier_enabled=False,
        kv_cpu_tier_bytes=1 << 20,
    )
    gone = documents.store_document(session=session, new=new_document("kv-gone"))
    kept = documents.store_document(session=session, new=new_document("kv-kept"))
    session.flush()
    try:
        for document, text in ((gone, "a" * 200), (kept, "b" * 200)):
            model = engine_holder.get_chat_model(settings, document_id=document.id)
            model.complete([{"role": "user", "content": text}], max_new_tokens=2)
        assert engine_holder.served_documents() == sorted([gone.id, kept.id])
        before = _cpu_blocks()
        assert kv_control.forget_deleted_documents(session=session) == []
        documents.delete_document(session=session, document_id=gone.id, files_dir=tmp_path)

        assert kv_control.forget_deleted_documents(session=session) == [gone.id]
        assert engine_holder.served_documents() == [kept.id]
        deadline = time.monotonic() + WAIT_S
        while _cpu_blocks() == before and time.monotonic() < deadline:
            time.sleep(0.05)  # the engine's loop takes the message between its steps
        # The two prompts share no full block: half were the deleted document's.
        assert _cpu_blocks() == before // 2 > 0
    finally:
        loop = engine_holder.get_engine_loop(settings)
        loop.close()
        loop.engine.close()
        engine_holder.reset()


def test_an_idle_worker_drops_a_deleted_documents_kv_on_its_timer(db_engine, tmp_path) -> None:
    """No task comes after the delete (and no broadcast reached the worker): the sweeper's timer
    drops the document's KV by itself, and keeps the other document's."""
    save_tiny_model(tmp_path / "model", "llama")
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        model=str(tmp_path / "model"),
        engine_device="cpu",
        engine_attention_backend="sdpa",
        engine_max_kv_cache_bytes=4 << 20,
        kv_disk_tier_enabled=False,
        kv_cpu_tier_bytes=1 << 20,
    )
    sessions = session_factory(db_engine)
    with sessions() as session:
        gone = documents.store_document(session=session, new=new_document("sweep-gone")).id
        kept = documents.store_document(session=session, new=new_document("sweep-kept")).id
        session.commit()
    try:
        for document_id, text in ((gone, "c" * 200), (kept, "d" * 200)):
            model = engine_holder.get_chat_model(settings, document_id=document_id)
            model.complete([{"role": "user", "content": text}], max_new_tokens=2)
        before = _cpu_blocks()
        assert kv_control.start_forget_sweeper(interval_s=0.05, sessions=sessions)
        assert not kv_control.start_forget_sweeper(interval_s=0.05, sessions=sessions)
        time.sleep(0.2)  # a few ticks with nothing deleted: nothing dropped
        assert engine_holder.served_documents() == sorted([gone, kept])
        assert _cpu_blocks() == before
        with sessions() as session:
            documents.delete_document(session=session, document_id=gone, files_dir=tmp_path)
            session.commit()

        deadline = time.monotonic() + WAIT_S
        while _cpu_blocks() == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine_holder.served_documents() == [kept]
        assert _cpu_blocks() == before // 2 > 0
    finally:
        kv_control.stop_forget_sweeper()
        loop = engine_holder.get_engine_loop(settings)
        loop.close()
        loop.engine.close()
        engine_holder.reset()
