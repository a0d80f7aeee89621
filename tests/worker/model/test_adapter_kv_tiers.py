"""A task's document tag reaches the engine: its prompts' KV goes to the disk tier under the
document's tag, and the write-behind's bytes reach the metrics."""

from __future__ import annotations

from prometheus_client import REGISTRY

from app.kv_cache_files import document_cache_tag
from tests.engine.conftest import save_tiny_model, tiny_engine
from worker.model.adapter import EngineChatModel


def test_a_tasks_prompts_are_kept_under_its_documents_tag(tmp_path) -> None:
    save_tiny_model(tmp_path / "model", "llama")
    kv_dir = tmp_path / "kv"
    engine = tiny_engine(
        tmp_path / "model", chunk_size=64, attention_backend="sdpa", kv_disk_tier_dir=kv_dir
    )
    before = REGISTRY.get_sample_value("longdoc_kv_tier_stored_bytes_total", {"tier": "disk"})
    model = EngineChatModel(engine, "tiny").for_task(
        priority=0, time_limit_s=None, cache_tag=document_cache_tag(5)
    )
    try:
        model.complete([{"role": "user", "content": "x" * 200}], max_new_tokens=2)
        engine.flush_kv_tiers()
    finally:
        model._loop.close()
        engine.close()
    listed = (kv_dir / "tags" / "document-5.list").read_text().splitlines()
    assert len(listed) == len(list(kv_dir.rglob("*.kv"))) > 0
    after = REGISTRY.get_sample_value("longdoc_kv_tier_stored_bytes_total", {"tier": "disk"})
    assert after > (before or 0)
