"""One engine per worker process, built on the first model task, never before a fork.

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

from app.settings import Settings
from engine import EngineConfig, LLMEngine
from worker.model_adapter import EngineChatModel
from worker.model_source import resolve_model_path

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_model: EngineChatModel | None = None
_built_in_pid: int | None = None


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
    )


def get_chat_model(settings: Settings) -> EngineChatModel:
    """This process's model, built on first use (seconds to minutes: weights, KV cache)."""
    global _model, _built_in_pid
    with _lock:
        if _model is not None and _built_in_pid == os.getpid():
            return _model
        if settings.engine_num_threads is not None:
            import torch

            torch.set_num_threads(settings.engine_num_threads)
        started = time.perf_counter()
        engine = LLMEngine(engine_config(settings))
        _model, _built_in_pid = EngineChatModel(engine, settings.model), os.getpid()
        logger.info(
            "engine built in pid %d on %s in %.1f s",
            _built_in_pid,
            engine.device,
            time.perf_counter() - started,
        )
        return _model


def is_built() -> bool:
    return _model is not None and _built_in_pid == os.getpid()


def reset() -> None:
    """Forget any engine (a new pool child starts clean)."""
    global _model, _built_in_pid
    with _lock:
        _model, _built_in_pid = None, None
