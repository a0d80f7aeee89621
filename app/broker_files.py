"""The embedded broker's transport: kombu's filesystem transport, with whole messages only.

kombu's own `_put` creates the message file in the queue folder and then writes it, while a
consumer in another process lists that folder, moves the file and reads it without a lock: a
consumer that comes between the two reads an empty file, fails to decode it, and the worker
stops ("Unrecoverable error: JSONDecodeError"). Seen with twenty summaries queued at once.
Here a message is written under a name no consumer takes (it does not end in
".<queue>.msg"), flushed to disk, then renamed into place: a rename within one folder is
atomic, so a consumer sees a whole message or none.

The exchange tables (which queue a routing key goes to) have the same fault: kombu opens the
table with "wb" (emptying it) and only then locks it, so a publisher reading the table at that
moment fails on an empty file, and two processes binding at once can each truncate the other's
table. Here a table is changed under a lock on a separate lock file and replaced whole by
rename, so a reader always sees a complete table.

`register()` makes "filesystem://" mean this transport in the process (the UI, the CLI and
every worker call it through app.services.dispatch before they connect).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem, virtual
from kombu.utils.json import dumps, loads

ALIAS = "filesystem"


def _write_whole(folder: str | Path, final: str | Path, data: bytes) -> None:
    """Write `data` to a hidden file in `folder`, flush it to disk, then rename it to `final`."""
    partial = os.path.join(folder, f".{uuid.uuid4()}.partial")
    try:
        with open(partial, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, final)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def _read_table(file: Path) -> list[Any]:
    try:
        text = file.read_bytes().decode()
    except FileNotFoundError:
        return []
    # An empty table can only be one that kombu's own transport left half-written.
    return [filesystem.exchange_queue_t(*entry) for entry in loads(text)] if text.strip() else []


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # kombu's name, milliseconds first so that a folder sorted by name is in sending order
        # (first come, first served); zero-padded, or "999_" would sort after "1000_".
        name = f"{round(monotonic() * 1000):015d}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        try:
            _write_whole(self.data_folder_out, final, dumps(payload).encode())
        except OSError as exc:
            raise ChannelError(f"Cannot add a message to {self.data_folder_out!r}") from exc

    @contextlib.contextmanager
    def _table_lock(self, file: Path) -> Iterator[None]:
        with open(file.with_name(f".{file.name}.lock"), "ab") as guard:
            filesystem.lock(guard, filesystem.LOCK_EX)
            try:
                yield
            finally:
                filesystem.unlock(guard)

    def _change_table(self, exchange: str, change: Callable[[list[Any]], list[Any]]) -> None:
        file = self._exchange_file(exchange)
        try:
            self.control_folder.mkdir(parents=True, exist_ok=True)
            with self._table_lock(file):
                queues = _read_table(file)
                changed = change(list(queues))
                if changed != queues:
                    _write_whole(self.control_folder, file, dumps(changed).encode())
        except OSError as exc:
            raise ChannelError(f"Cannot change the exchange table {file}") from exc

    def get_table(self, exchange: str) -> list[Any]:
        file = self._exchange_file(exchange)
        try:
            return _read_table(file)
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc

    def queue_bind(
        self,
        queue: str,
        exchange: str | None = None,
        routing_key: str = "",
        arguments: Any = None,
        **kwargs: Any,
    ) -> None:
        # kombu records the binding in the process's memory before it writes the table, and
        # another thread of the process that finds it there publishes at once: to a table that
        # may not hold it yet, so the message is dropped. The table on disk comes first here.
        exchange = exchange or "amq.direct"
        if not self.state.has_binding(queue, exchange, routing_key):
            meta = self.typeof(exchange).prepare_bind(queue, exchange, routing_key, arguments)
            self._queue_bind(exchange, *meta)
        super().queue_bind(queue, exchange, routing_key, arguments, **kwargs)

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._change_table(exchange, lambda queues: queues if entry in queues else [entry, *queues])

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        # kombu's virtual channel forgets the queue; the table is then changed here, not by
        # kombu's filesystem channel (which rewrites it in place).
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._change_table(exchange, lambda queues: [q for q in queues if q != entry])


class Transport(filesystem.Transport):
    Channel = Channel


def register() -> None:
    TRANSPORT_ALIASES[ALIAS] = f"{__name__}:Transport"
