"""One engine per worker process, built on the first model task, never before a fork.

The model worker runs Celery's threads pool: every task thread of the process shares this one
engine (one copy of the weights per GPU) through its EngineLoop, so the model calls of all
running tasks are batched together (worker/model/adapter.py).

Celery's prefork pool forks its children from the main worker process. A CUDA context does not
survive a fork, and a model loaded in the parent would be copied into every child, so the
engine is built lazily inside the process that runs the task. `reset()` runs in each new pool
child (worker_process_init) and the builder's pid is checked too: an engine inherited through a
fork is never used.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from app.kv_cache_files import document_cache_tag
from app.settings import Settings
from engine import EngineConfig, LLMEngine, SamplingParams
from engine.engine_loop import EngineLoop
from worker.model.adapter import PRIORITY_BATCH, EngineChatModel
from worker.model.kernel_build import put_ninja_on_path
from worker.model.openai_client import OpenAIChatModel
from worker.model.server_api import ServerConfig
from worker.model.source import resolve_model_path

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_model: EngineChatModel | None = None
_loop: EngineLoop | None = None
_built_in_pid: int | None = None
# With LONGDOC_LLM_BASE_URL set, an OpenAI-compatible server writes instead of the engine: one
# client per process (its connections and request slots are shared by every task thread).
_server: OpenAIChatModel | None = None
_server_pid: int | None = None
# The documents whose KV this process's engine may hold (their questions ran here).
_served_documents: set[int] = set()


def engine_config(settings: Settings) -> EngineConfig:
    """The engine's frozen config from the LONGDOC_ENGINE_* settings."""
    return EngineConfig(
        model_path=resolve_model_path(settings.model),
        model_cache_dir=settings.model_cache_dir,
        device=settings.engine_device,
        dtype=settings.engine_dtype,
        chunk_size=settings.engine_chunk_size,
        oom_policy=settings.engine_oom_policy,
        max_kv_cache_bytes=settings.engine_max_kv_cache_bytes,
        attention_backend=settings.engine_attention_backend,
        compile=settings.engine_compile,
        weights=settings.engine_weights,
        kv_dtype=settings.engine_kv_dtype,
        fp8_w8a8_decode=settings.engine_fp8_w8a8_decode,
        fp8_attention=settings.engine_fp8_attention,
        pdl=settings.engine_pdl,
        max_num_seqs=settings.engine_max_num_seqs,
        admission_window_s=settings.engine_admission_window_s,
        kv_cpu_tier_bytes=settings.kv_cpu_tier_bytes,
        kv_disk_tier_dir=settings.kv_cache_dir,
        kv_disk_tier_bytes=settings.kv_disk_tier_bytes,
    )


def get_chat_model(
    settings: Settings,
    *,
    priority: int = PRIORITY_BATCH,
    time_limit_s: float | None = None,
    document_id: int | None = None,
) -> EngineChatModel | OpenAIChatModel:
    """This process's model, built on first use (seconds to minutes: weights, KV cache), for
    one task: its requests get `priority` and end at the task's time limit. With
    LONGDOC_LLM_BASE_URL set, the model server's client instead (no engine is built).
    document_id: the task's document; its prompts' KV is kept in the lower tiers under the
    document's tag (app/kv_cache_files.py), so deleting the document deletes it."""
    if settings.uses_model_server:
        return _server_model(settings).for_task(priority=priority, time_limit_s=time_limit_s)
    cache_tag = None if document_id is None else document_cache_tag(document_id)
    model = _shared_model(settings)
    if document_id is not None:
        with _lock:
            _served_documents.add(int(document_id))
    return model.for_task(priority=priority, time_limit_s=time_limit_s, cache_tag=cache_tag)


def _server_model(settings: Settings) -> OpenAIChatModel:
    global _server, _server_pid
    config = ServerConfig.from_settings(settings)
    with _lock:
        if _server is None or _server_pid != os.getpid() or _server.config != config:
            _server, _server_pid = OpenAIChatModel(config), os.getpid()
            logger.info("model server client for %s in pid %d", config.host, _server_pid)
        return _server


def get_engine_loop(settings: Settings) -> EngineLoop:
    """This process's engine loop, built on first use: the one the model tasks' requests go
    through, so that `longdoc serve` (worker/serve/) shares their batches."""
    _shared_model(settings)
    assert _loop is not None
    return _loop


def _shared_model(settings: Settings) -> EngineChatModel:
    global _model, _loop, _built_in_pid
    with _lock:
        if _model is not None and _built_in_pid == os.getpid():
            return _model
        if settings.engine_num_threads is not None:
            import torch

            torch.set_num_threads(settings.engine_num_threads)
        started = time.perf_counter()
        put_ninja_on_path()  # torch builds the CPU attention kernel with it
        engine = LLMEngine(engine_config(settings))
        sampling = SamplingParams(
            repetition_penalty=settings.generation_repetition_penalty,
            no_repeat_ngram_size=settings.generation_no_repeat_ngram_size,
            stop_on_loop=settings.generation_stop_on_loop,
            max_phrase_repeats=settings.generation_max_phrase_repeats,
        )
        _loop = EngineLoop(engine)
        _model = EngineChatModel(engine, settings.model, loop=_loop, sampling=sampling)
        _built_in_pid = os.getpid()
        logger.info(
            "engine built in pid %d on %s in %.1f s",
            _built_in_pid,
            engine.device,
            time.perf_counter() - started,
        )
        return _model


def forget_document_kv(document_id: int) -> bool:
    """Drop the document's KV from every tier of this process's engine (on its loop's thread,
    soon after): the device's prefix cache, the CPU tier, and the disk folder. False when this
    process has no engine, so holds none of it."""
    with _lock:
        loop = _loop if _built_in_pid == os.getpid() else None
        _served_documents.discard(int(document_id))
    if loop is None:
        return False
    loop.forget_cache_tag(document_cache_tag(document_id))
    return True


def served_documents() -> list[int]:
    """The documents whose KV this process's engine may hold (none without an engine)."""
    with _lock:
        return sorted(_served_documents) if _built_in_pid == os.getpid() else []


def kv_tier_sizes() -> dict[str, int] | None:
    """What this process's engine caches hold now (LLMEngine.kv_tier_sizes); None without one."""
    with _lock:
        loop = _loop if _built_in_pid == os.getpid() else None
    return None if loop is None else loop.engine.kv_tier_sizes()


def reset() -> None:
    """Forget any engine (a new pool child starts clean)."""
    global _model, _loop, _built_in_pid, _server, _server_pid
    with _lock:
        _model, _loop, _built_in_pid = None, None, None
        _server, _server_pid = None, None
        _served_documents.clear()
