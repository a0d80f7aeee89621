"""Write-behind to the disk tier: one background thread turns host copies of blocks into files,
so no request waits for a disk. A full queue drops the write (the block stays computable)."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from dataclasses import dataclass

import torch

from engine.kv_tiers.disk_tier import DiskTier

logger = logging.getLogger(__name__)

MAX_QUEUED_BLOCKS = 65536
_TOUCH = "touch"  # a queue item: apply the disk tier's pending touches (DiskTier.apply_touches)


@dataclass
class _Write:
    block_hash: int
    token_ids: tuple[int, ...]
    kv: torch.Tensor | None  # None: the file exists, only list it under the tag
    tag: str
    sums: tuple[int, int] | None = None  # the payload's "sum64x2" (block_file.py), if computed


class DiskWriter:
    def __init__(self, disk: DiskTier, *, max_queued: int = MAX_QUEUED_BLOCKS) -> None:
        self.disk = disk
        self.num_dropped = 0
        self._queue: queue.Queue[_Write | str | None] = queue.Queue(maxsize=max_queued)
        self._thread = threading.Thread(target=self._run, name="kv-disk-writer", daemon=True)
        self._thread.start()

    def submit(
        self,
        block_hash: int,
        token_ids: tuple[int, ...],
        kv: torch.Tensor | None,
        tag: str,
        sums: tuple[int, int] | None = None,
    ) -> None:
        try:
            self._queue.put_nowait(_Write(block_hash, token_ids, kv, tag, sums))
        except queue.Full:
            self.num_dropped += 1

    def submit_touches(self) -> None:
        """Move the times of the files read so far (after a load: off the readers' threads)."""
        # A full queue: the next eviction, index rebuild or close applies them.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_TOUCH)

    def flush(self) -> None:
        """Wait until every block submitted so far is written (or given up)."""
        self._queue.join()

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if item == _TOUCH:
                    self.disk.apply_touches()
                else:
                    self._write(item)  # type: ignore[arg-type]
            except Exception:  # a bug must not stop the writer: that block is simply not kept
                logger.exception("writing a KV block to the disk tier failed")
            finally:
                self._queue.task_done()

    def _write(self, item: _Write) -> None:
        if item.kv is None:
            self.disk.list_under(item.tag, item.block_hash)
            return
        kv = item.kv.contiguous()
        payload = memoryview(kv.reshape(-1).view(torch.uint8).numpy())
        self.disk.write(
            item.block_hash,
            item.token_ids,
            payload,
            dtype=str(kv.dtype).removeprefix("torch."),
            shape=tuple(kv.shape),
            tag=item.tag,
            sums=item.sums,
        )
