"""The KV tiers' remote-control commands: a deleted document's KV leaves every worker's engine.

Deleting a document broadcasts CONTROL_FORGET_DOCUMENT_KV to every worker connected to the
broker (app.services.dispatch.tell_workers_to_forget_document_kv); each drops the document's
blocks from its engine's GPU prefix cache, CPU tier and disk folder, whether the disk tier is on
or not. A worker down at that moment comes back with empty memory tiers, and the disk folder's
tombstones cover its disk tier (app/kv_cache_files.py). INSPECT_KV_TIERS says what a worker's
engine caches hold now (a broadcast with reply=True).

Commands run in the worker's main process, where the threads pool's (and solo's) engine lives;
a prefork model worker's engine is in its pool child and is not reached by them. So each model
task first drops the KV of the documents its process served that no longer exist
(forget_deleted_documents): that catches a prefork child, and a worker that missed the
broadcast (the broker was down when the document was deleted), at its next task. A worker that
gets no task does the same on a timer (start_forget_sweeper, every kv_forget_sweep_s seconds), so
a deleted document's KV leaves an idle worker's memory too, within that time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from celery.worker.control import control_command, inspect_command
from sqlalchemy.orm import Session

from app.services import documents
from app.services.dispatch import CONTROL_FORGET_DOCUMENT_KV, INSPECT_KV_TIERS
from worker.model import engine_holder

logger = logging.getLogger(__name__)


@control_command(
    name=CONTROL_FORGET_DOCUMENT_KV, args=[("document_id", int)], signature="<document_id>"
)
def forget_document_kv(state: Any, document_id: int, **kwargs: Any) -> dict[str, Any]:
    """Drop a deleted document's KV from this worker's engine, in every tier."""
    told = engine_holder.forget_document_kv(int(document_id))
    logger.info(
        "document %s deleted: its KV dropped from this worker's engine: %s", document_id, told
    )
    return {"ok": "dropped" if told else "no engine here"}


@inspect_command(name=INSPECT_KV_TIERS)
def kv_tiers(state: Any, **kwargs: Any) -> dict[str, Any]:
    """What this worker's engine caches hold now (an empty dict: no engine built)."""
    return {"ok": engine_holder.kv_tier_sizes() or {}}


def forget_deleted_documents(*, session: Session) -> list[int]:
    """Drop from this process's engine the KV of the documents it served that no longer exist;
    returns their ids."""
    served = engine_holder.served_documents()
    if not served:
        return []
    gone = documents.missing_document_ids(session=session, document_ids=served)
    for document_id in gone:
        engine_holder.forget_document_kv(document_id)
    if gone:
        logger.info("KV of deleted documents %s dropped from this worker's engine", gone)
    return gone


_sweeper_lock = threading.Lock()
_sweeper: tuple[int, threading.Thread, threading.Event] | None = None  # (pid, thread, stop)


def start_forget_sweeper(*, interval_s: float, sessions: Callable[[], Session]) -> bool:
    """Run forget_deleted_documents every interval_s seconds in a daemon thread of this process
    (once per process: a pool child starts its own; True when this call started it). It reads
    the database only while the engine holds some document's KV; a failed read (the database
    away) is logged and tried again at the next tick."""
    global _sweeper
    with _sweeper_lock:
        if _sweeper is not None and _sweeper[0] == os.getpid() and _sweeper[1].is_alive():
            return False
        stop = threading.Event()
        thread = threading.Thread(
            target=_sweep, args=(interval_s, sessions, stop), name="kv-forget-sweeper", daemon=True
        )
        _sweeper = (os.getpid(), thread, stop)
        thread.start()
        return True


def stop_forget_sweeper(timeout_s: float = 10.0) -> None:
    """Stop this process's sweeper (tests; a worker's daemon thread ends with the process)."""
    global _sweeper
    with _sweeper_lock:
        sweeper, _sweeper = _sweeper, None
    if sweeper is not None and sweeper[0] == os.getpid():
        sweeper[2].set()
        sweeper[1].join(timeout_s)


def _sweep(interval_s: float, sessions: Callable[[], Session], stop: threading.Event) -> None:
    failures = 0
    while not stop.wait(interval_s):
        if not engine_holder.served_documents():
            continue
        try:
            with sessions() as session:
                forget_deleted_documents(session=session)
            if failures:
                logger.info("KV sweep: the database answers again after %d failed tries", failures)
            failures = 0
        except Exception as error:  # never let the thread die: the next tick tries again
            failures += 1
            if failures == 1:
                logger.warning(
                    "KV sweep: could not read which documents were deleted (%s); trying again "
                    "every %.0f s",
                    type(error).__name__,
                    interval_s,
                )
