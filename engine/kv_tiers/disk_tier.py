"""The disk tier: one file per KV block under a folder that the workers of a machine share.

Layout under the root (the data folder's kv_cache/ by default):
  <namespace>/<2 hex>/<16 hex>.kv   a block: a checked header, then its KV bytes (block_file.py)
  tags/<tag>.list                   the block files written for a tag (a document), a line each
  forgotten/<tag>                   a forgotten tag: its files are deleted, never written again
                                    (tombstones.py)

Files are written to <name>.tmp, opened exclusively (one writer per file: a second process
writing the same block leaves it to the first), then renamed into place, so a reader sees a
whole file or none. A file that is truncated, corrupted or not what its name says is deleted
and reported as a miss: the engine computes that block again. Every write failure (a full
disk, a read-only folder) is a skipped write, never an error for the request.

A tag's blocks are deleted by forget_tag: the tombstone first, then every file its list names.
A writer appends to the list before it renames its file into place and looks for the tombstone
after: whichever of the two comes second deletes the file.

Torch-free: the payload is bytes; engine/kv_tiers/tiered_cache.py turns it into tensors.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import EngineError
from engine.kv_tiers.block_file import (
    HAS_PREADV,
    OTHER_LAYOUT,
    BlockMisfit,
    DiskBlock,
    encode_head,
    new_buffer,
    read_block,
    read_expected,
)
from engine.kv_tiers.tombstones import (
    BLOCK_PATH,
    FORGOTTEN_DIR,
    TAGS_DIR,
    forget_tag_files,
    forgotten_tags,
)

_TAG_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
STALE_TMP_S = 600.0  # a .tmp this old is a writer's that died
EVICT_TO = 0.9  # eviction frees down to this share of the cap
# A read moves a file's modification time (the recency every process's eviction reads) only when
# it is older than this, and later (apply_touches: after the load, on the writer's thread), so a
# load of 8,192 blocks makes no utime call on its readers' threads.
RECENCY_STEP_S = 60.0


class InvalidCacheTag(EngineError, ValueError):
    """A cache tag must be 1-100 letters, digits, dots, dashes or underscores."""


def check_tag(tag: str) -> str:
    if not isinstance(tag, str) or not _TAG_PATTERN.match(tag) or tag in (".", ".."):
        raise InvalidCacheTag(
            f"The cache tag {tag!r} is not 1-100 letters, digits, dots, dashes or underscores."
        )
    return tag


def block_file_name(block_hash: int) -> str:
    return f"{block_hash & 0xFFFFFFFFFFFFFFFF:016x}"


@dataclass
class DiskTierCounts:
    num_written: int = 0
    num_bytes_written: int = 0
    num_write_failures: int = 0
    num_corrupt_dropped: int = 0
    num_evicted: int = 0
    num_forgotten_files: int = 0


class DiskTier:
    def __init__(self, root: Path, namespace: str, *, max_bytes: int) -> None:
        self.root = Path(root)
        self.namespace = namespace
        self.max_bytes = max_bytes
        self.counts = DiskTierCounts()
        self._lock = threading.Lock()
        self._dir_mode = _make_dir(self.root, _parent_mode(self.root))
        self._file_mode = self._dir_mode & 0o666
        for name in (namespace, TAGS_DIR, FORGOTTEN_DIR):
            _make_dir(self.root / name, self._dir_mode)
        # Every block file of the folder (all namespaces): relative path -> (bytes, last use).
        self._index: dict[str, tuple[int, float]] = {}
        self._touches: dict[str, float] = {}  # files read, whose time is still to be moved
        self._total_bytes = 0
        self.rebuild_index()

    # ---- lookup ---------------------------------------------------------------------------

    def relative_path(self, block_hash: int) -> str:
        name = block_file_name(block_hash)
        return f"{self.namespace}/{name[:2]}/{name}.kv"

    def knows(self, block_hash: int) -> bool:
        """Whether the block's file is in this process's index (no file system call: a file
        another process wrote since the index was read is not known yet)."""
        return self.relative_path(block_hash) in self._index

    def contains(self, block_hash: int) -> bool:
        return (self.root / self.relative_path(block_hash)).is_file()

    def read(
        self,
        block_hash: int,
        token_ids: tuple[int, ...],
        take: Callable[[str, tuple[int, ...], int], memoryview] = new_buffer,
        expect: tuple[str, tuple[int, ...], int] | None = None,
        *,
        defer_sums: bool = False,
    ) -> DiskBlock | None:
        """The block's payload, checked, in memory from take (block_file.read_block); None when
        absent, a misfit (take raised BlockMisfit), or unreadable (then deleted). expect, the
        (dtype, shape, bytes) the reader will take: a padded file of that block is then read in
        one call into take's memory (block_file.read_expected). defer_sums: a "sum64x2" file's
        sums come back unchecked in DiskBlock.sums, for the caller to check (and drop() the
        file when they do not match)."""
        relative = self.relative_path(block_hash)
        try:
            fd = os.open(self.root / relative, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            block = self._read_open(fd, block_hash, token_ids, take, expect, defer_sums)
        except (BlockMisfit, OSError):
            return None
        finally:
            os.close(fd)
        if block is None:
            self.counts.num_corrupt_dropped += 1
            self._delete(relative)
            return None
        now = time.time()
        with self._lock:
            _, last_use = self._index.get(relative, (0, 0.0))  # the file's time, as last known
            if now - last_use > RECENCY_STEP_S:
                last_use = self._touches[relative] = now
            self._index[relative] = (block.num_bytes, last_use)
        return block

    def _read_open(
        self,
        fd: int,
        block_hash: int,
        token_ids: tuple[int, ...],
        take: Callable[[str, tuple[int, ...], int], memoryview],
        expect: tuple[str, tuple[int, ...], int] | None,
        defer_sums: bool,
    ) -> DiskBlock | None:
        if expect is not None and HAS_PREADV:
            dtype, shape, num_bytes = expect
            payload = take(dtype, shape, num_bytes)
            block = read_expected(
                fd, self.namespace, block_hash, token_ids, (dtype, shape), payload, defer_sums
            )
            if block != OTHER_LAYOUT:
                return block  # type: ignore[return-value]

            def take_again(dtype: str, shape: tuple[int, ...], size: int) -> memoryview:
                if (dtype, shape, size) != expect:
                    raise BlockMisfit
                return payload

            take = take_again
        size = os.fstat(fd).st_size
        with open(fd, "rb", buffering=0, closefd=False) as file:
            return read_block(file, size, self.namespace, block_hash, token_ids, take, defer_sums)

    # ---- write ----------------------------------------------------------------------------

    def write(
        self,
        block_hash: int,
        token_ids: tuple[int, ...],
        payload: memoryview,
        *,
        dtype: str,
        shape: tuple[int, ...],
        tag: str,
        sums: tuple[int, int] | None = None,
    ) -> bool:
        """Store a block for tag; False when it was not written (tag forgotten, another writer,
        a write error). A block already on disk is only listed under tag. sums: the payload's
        "sum64x2", computed where the block was (block_file.py); else a checksum is computed."""
        relative = self.relative_path(block_hash)
        if self.is_forgotten(tag):
            return False
        path = self.root / relative
        try:
            self._append_to_list(tag, relative)
            if path.is_file():
                return self._recheck_forgotten(tag, relative)
            _make_dir(path.parent, self._dir_mode)
            head = encode_head(self.namespace, block_hash, token_ids, payload, dtype, shape, sums)
            tmp = path.with_suffix(".tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, self._file_mode)
            except FileExistsError:
                return False  # another process writes this block now
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(head)
                    file.write(payload)
                os.chmod(tmp, self._file_mode)
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except OSError:
            self.counts.num_write_failures += 1
            return False
        size = len(head) + payload.nbytes
        self.counts.num_written += 1
        self.counts.num_bytes_written += size
        with self._lock:
            self._index[relative] = (size, time.time())
            self._total_bytes += size
            over = self._total_bytes > self.max_bytes
        if not self._recheck_forgotten(tag, relative):
            return False
        if over:
            self.evict()
        return True

    def drop(self, block_hash: int) -> None:
        """Delete a block's file that failed a check its reader deferred (read's defer_sums)."""
        self.counts.num_corrupt_dropped += 1
        self._delete(self.relative_path(block_hash))

    def list_under(self, tag: str, block_hash: int) -> None:
        """List an existing block file under tag too (its deletion deletes the file)."""
        relative = self.relative_path(block_hash)
        if self.is_forgotten(tag) or not (self.root / relative).is_file():
            return
        try:
            self._append_to_list(tag, relative)
        except OSError:
            self.counts.num_write_failures += 1
            return
        self._recheck_forgotten(tag, relative)

    # ---- forgetting -----------------------------------------------------------------------

    def is_forgotten(self, tag: str) -> bool:
        return (self.root / FORGOTTEN_DIR / check_tag(tag)).exists()

    def forget_tag(self, tag: str) -> list[str]:
        """Delete every block file listed for tag, in any namespace, and refuse its writes from
        now on (tombstones.py). Returns the listed paths, relative to the root."""
        listed = forget_tag_files(self.root, check_tag(tag))
        self._drop_from_index(listed)
        self.counts.num_forgotten_files += len(listed)
        return listed

    def forgotten_tags(self) -> set[str]:
        return forgotten_tags(self.root)

    def hashes_in_namespace(self, relative_paths: list[str]) -> list[int]:
        """The chain hashes of the block files of this namespace among relative_paths."""
        hashes = []
        for relative in relative_paths:
            if relative.startswith(self.namespace + "/"):
                value = int(relative.rsplit("/", 1)[1].removesuffix(".kv"), 16)
                hashes.append(value - (1 << 64) if value >= 1 << 63 else value)
        return hashes

    # ---- capacity -------------------------------------------------------------------------

    @property
    def total_bytes(self) -> int:
        return self._total_bytes

    def apply_touches(self) -> int:
        """Move the modification time of the files read since the last call (read() leaves it
        for later, off its readers' threads); the number of files."""
        with self._lock:
            touches, self._touches = self._touches, {}
        for relative, when in touches.items():
            with contextlib.suppress(OSError):
                os.utime(self.root / relative, (when, when))
        return len(touches)

    def rebuild_index(self) -> None:
        """Read every block file's size and last use (its mtime) from the folder, the pending
        touches applied first; delete the .tmp files of writers that died."""
        self.apply_touches()
        index: dict[str, tuple[int, float]] = {}
        now = time.time()
        for namespace_dir in _subdirs(self.root):
            if namespace_dir.name in (TAGS_DIR, FORGOTTEN_DIR):
                continue
            for shard in _subdirs(namespace_dir):
                for entry in _entries(shard):
                    relative = f"{namespace_dir.name}/{shard.name}/{entry.name}"
                    try:
                        stat = entry.stat()
                    except OSError:
                        continue
                    if entry.name.endswith(".tmp"):
                        if now - stat.st_mtime > STALE_TMP_S:
                            Path(entry.path).unlink(missing_ok=True)
                    elif BLOCK_PATH.match(relative):
                        index[relative] = (stat.st_size, stat.st_mtime)
        with self._lock:
            self._index = index
            self._total_bytes = sum(size for size, _ in index.values())

    def evict(self) -> None:
        """Delete the least recently used block files (across every process sharing the folder:
        the index is read again first) until the folder is under EVICT_TO of the cap."""
        self.rebuild_index()
        with self._lock:
            if self._total_bytes <= self.max_bytes:
                return
            target = int(self.max_bytes * EVICT_TO)
            victims = []
            for relative, (size, _) in sorted(self._index.items(), key=lambda kv: kv[1][1]):
                if self._total_bytes <= target:
                    break
                victims.append(relative)
                self._total_bytes -= size
                del self._index[relative]
        for relative in victims:
            (self.root / relative).unlink(missing_ok=True)
        self.counts.num_evicted += len(victims)

    # ---- internals ------------------------------------------------------------------------

    def _append_to_list(self, tag: str, relative: str) -> None:
        path = self.root / TAGS_DIR / f"{check_tag(tag)}.list"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, self._file_mode)
        try:
            os.write(fd, (relative + "\n").encode())  # one short write: appended whole
        finally:
            os.close(fd)

    def _recheck_forgotten(self, tag: str, relative: str) -> bool:
        if not self.is_forgotten(tag):
            return True
        self._delete(relative)
        return False

    def _delete(self, relative: str) -> None:
        (self.root / relative).unlink(missing_ok=True)
        self._drop_from_index([relative])

    def _drop_from_index(self, relative_paths: list[str]) -> None:
        with self._lock:
            for relative in relative_paths:
                entry = self._index.pop(relative, None)
                if entry is not None:
                    self._total_bytes -= entry[0]


def _parent_mode(root: Path) -> int:
    """The permissions of the folder that holds the cache (the data folder)."""
    for folder in (root, *root.parents):
        if folder.is_dir():
            return folder.stat().st_mode & 0o777
    return 0o700


def _make_dir(path: Path, mode: int) -> int:
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)
    return path.stat().st_mode & 0o777


def _subdirs(path: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(path) if e.is_dir()]
    except OSError:
        return []


def _entries(path: Path) -> list[os.DirEntry]:
    try:
        return [e for e in os.scandir(path) if e.is_file()]
    except OSError:
        return []
