"""One block file of the disk tier: a header, then the block's KV bytes.

  b"LDKV\\x01" | header length (4 bytes, little-endian) | header (JSON: namespace, chain hash,
  token ids, dtype, shape, checksum and length of the payload; spaces after it up to the next
  4 KiB) | payload

The payload starts at a page boundary of the file: reading it into page-aligned memory (a host
block) the kernel copies from the page cache aligned on both sides, about 30% faster than from
the odd offset an unpadded header left (files written before the padding still read).

A file is used only when all of it checks out: the magic, the header, the namespace, the hash
and token ids asked for, the payload's length and its checksum. The checksum is XXH3-64 (about
20 GB/s a core) where the xxhash package is installed, else crc32 (about 4 GB/s: it was two
thirds of a block's read time); the header names which, so a file of either kind is read. A file
whose checksum this process cannot compute is left for one that can, not loaded.

A GPU engine writes the kind "sum64x2" instead: two sums over the payload's 64-bit words, plain and
weighted by position (mod 2**64), computed on the GPU as the block is copied down, and checked
on the GPU after a load copied the block up (block_sums.py): the host then never reads a payload
a second time to hash it, which cost a sixth of a 128K load's read rate on an H100 host. Any
reader can check such a file on the host too (numpy), as a CPU engine does.

A reader that knows the block it expects (dtype, shape, size: the tier's own) reads a padded file
in one call (read_expected: os.preadv of the head page, the payload and one byte more, which
shows the file is not longer than it says): every call that releases the GIL is a hand-off among
the reader threads, and on an H100 host each one cost about 10 us of the pool's time.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import BinaryIO

import numpy as np

try:
    import xxhash
except ImportError:  # an environment without it (a bare GPU image): crc32
    xxhash = None

MAGIC = b"LDKV\x01"
HEAD_PREFIX = len(MAGIC) + 4
MAX_HEADER_BYTES = 1 << 20
PAYLOAD_ALIGN = 4096


@dataclass
class DiskBlock:
    payload: memoryview
    dtype: str
    shape: tuple[int, ...]
    num_bytes: int  # the file's size
    # The file's "sum64x2" values when the reader deferred their check (to the GPU, after the
    # copy up: block_sums.py); None when the payload was checked here.
    sums: tuple[int, int] | None = None


def encode_head(
    namespace: str,
    block_hash: int,
    token_ids: tuple[int, ...],
    payload: memoryview,
    dtype: str,
    shape: tuple[int, ...],
    sums: tuple[int, int] | None = None,
) -> bytes:
    """Everything the file holds before the payload; sums: the payload's "sum64x2" (computed
    where the block was), else its checksum is computed here."""
    header = json.dumps(
        {
            "namespace": namespace,
            "hash": block_hash,
            "token_ids": list(token_ids),
            "dtype": dtype,
            "shape": list(shape),
            **({SUMS: list(sums)} if sums is not None else checksum(payload)),
            "num_bytes": payload.nbytes,
        }
    ).encode()
    header += b" " * (-(HEAD_PREFIX + len(header)) % PAYLOAD_ALIGN)  # JSON allows the spaces
    return MAGIC + len(header).to_bytes(4, "little") + header


SUMS = "sum64x2"


@lru_cache(maxsize=4)
def _weights(num_words: int) -> np.ndarray:
    return np.arange(1, 2 * num_words, 2, dtype=np.int64)  # odd: a word's weight is never 0


def payload_sums(payload: memoryview) -> list[int]:
    """ "sum64x2" of a payload on the host: the sum of its little-endian 64-bit words and the
    sum of word i times 2i + 1, both mod 2**64 as signed integers (as block_sums computes on
    the device; integer sums wrap alike in numpy and torch, in any order)."""
    words = np.frombuffer(payload, dtype="<i8")
    with np.errstate(over="ignore"):
        return [int(words.sum(dtype=np.int64)), int((words * _weights(words.size)).sum())]


def _checksum_function(kind: str) -> Callable[[memoryview], int | list[int]] | None:
    """The function of a checksum kind a header names; None where this process has none."""
    if kind == "xxh3_64":
        return None if xxhash is None else xxhash.xxh3_64_intdigest
    if kind == SUMS:
        return payload_sums
    return zlib.crc32 if kind == "crc32" else None


def checksum(payload: memoryview) -> dict[str, int]:
    """The payload's checksum, keyed by its kind as the header stores it."""
    kind = "crc32" if xxhash is None else "xxh3_64"
    compute = _checksum_function(kind)
    assert compute is not None
    return {kind: compute(payload)}


class BlockMisfit(Exception):
    """The block's dtype or shape is not what the reader holds (its namespace should make this
    impossible), or its checksum is of a kind this process cannot compute: not loaded, and the
    file is left alone."""


HAS_PREADV = hasattr(os, "preadv")
OTHER_LAYOUT = "other layout"  # read_expected: this file needs read_block


def new_buffer(dtype: str, shape: tuple[int, ...], num_bytes: int) -> memoryview:
    return memoryview(bytearray(num_bytes))


def _read_into(file: BinaryIO, view: memoryview) -> int:
    """Bytes read into view, looping over short reads (an unbuffered file reads once a call)."""
    done = 0
    while done < view.nbytes:
        got = file.readinto(view[done:])
        if not got:
            break
        done += got
    return done


def _names(header: dict, namespace: str, block_hash: int, token_ids: tuple[int, ...]) -> bool:
    """Whether a file's header is of the block asked for."""
    return (
        header["namespace"] == namespace
        and header["hash"] == block_hash
        and tuple(header["token_ids"]) == token_ids
    )


def _header_checksum(header: dict) -> tuple[str, Callable[[memoryview], int | list[int]]]:
    """The checksum kind a header names and its function; BlockMisfit where this process has
    none (the file is left for one that has)."""
    kind = next((k for k in ("xxh3_64", SUMS) if k in header), "crc32")
    compute = _checksum_function(kind)
    if compute is None:
        raise BlockMisfit
    return kind, compute


def _verified(
    header: dict, payload: memoryview, defer_sums: bool
) -> tuple[bool, tuple[int, int] | None]:
    """(whether the payload is good as far as checked here, the sums left to the caller)."""
    kind, compute = _header_checksum(header)
    if kind == SUMS:
        sums = header[SUMS]
        if not (isinstance(sums, list) and len(sums) == 2 and all(type(v) is int for v in sums)):
            return False, None
        if defer_sums:
            return True, (sums[0], sums[1])
    return header[kind] == compute(payload), None


def read_block(
    file: BinaryIO,
    size: int,
    namespace: str,
    block_hash: int,
    token_ids: tuple[int, ...],
    take: Callable[[str, tuple[int, ...], int], memoryview] = new_buffer,
    defer_sums: bool = False,
) -> DiskBlock | None:
    """The block in the open file of `size` bytes if it is whole and what its name says; else
    None. The payload is read straight into take(dtype, shape, num_bytes), the memory it will be
    used from (a pinned host block on a GPU machine): no second copy, and no fresh buffer to
    fault in page by page. file is best unbuffered: the payload then comes in one read, from a
    page boundary of the file into (a host block's) page-aligned memory. take may raise
    BlockMisfit, and so does a checksum kind this process cannot compute."""
    try:
        head = file.read(min(size, PAYLOAD_ALIGN))  # the whole head of a padded file
        if len(head) < HEAD_PREFIX or not head.startswith(MAGIC):
            return None
        header_len = int.from_bytes(head[len(MAGIC) : HEAD_PREFIX], "little")
        start = HEAD_PREFIX + header_len
        if header_len > MAX_HEADER_BYTES or start > size:
            return None
        if start > len(head):
            head += file.read(start - len(head))
            if len(head) != start:
                return None
        header = json.loads(head[HEAD_PREFIX:start])
        num_bytes = size - start
        if not _names(header, namespace, block_hash, token_ids) or header["num_bytes"] != num_bytes:
            return None
        _header_checksum(header)  # BlockMisfit before any read, for a kind not computable here
        dtype, shape = str(header["dtype"]), tuple(header["shape"])
        payload = take(dtype, shape, num_bytes)
        early = head[start:]  # payload bytes the first read brought: an unpadded file's
        payload[: len(early)] = early
        if _read_into(file, payload[len(early) :]) != num_bytes - len(early):
            return None
        good, sums = _verified(header, payload, defer_sums)
        return DiskBlock(payload, dtype, shape, size, sums) if good else None
    except (ValueError, KeyError, TypeError):
        return None


def read_expected(
    fd: int,
    namespace: str,
    block_hash: int,
    token_ids: tuple[int, ...],
    expect: tuple[str, tuple[int, ...]],
    payload: memoryview,
    defer_sums: bool = False,
) -> DiskBlock | str | None:
    """The block in the open file fd, read with one os.preadv straight into payload (the
    expected block's memory), if the file is padded and holds a block of expect's dtype and
    shape and of payload's size; else OTHER_LAYOUT (a file from before the padding, another
    block's shape, a short read: read_block decides, reading it again) or None (not whole or
    not what its name says). Raises BlockMisfit for a checksum this process cannot compute.
    defer_sums: a "sum64x2" file's sums are returned unchecked (the caller checks them on the
    device); other kinds are checked here."""
    head, probe = bytearray(PAYLOAD_ALIGN), bytearray(1)
    got = os.preadv(fd, [head, payload, probe], 0)
    if got < PAYLOAD_ALIGN:
        return OTHER_LAYOUT  # a short read (a network filesystem may) or a small file
    if not head.startswith(MAGIC):
        return None
    if int.from_bytes(head[len(MAGIC) : HEAD_PREFIX], "little") != PAYLOAD_ALIGN - HEAD_PREFIX:
        return OTHER_LAYOUT
    try:
        header = json.loads(head[HEAD_PREFIX:])
        if not _names(header, namespace, block_hash, token_ids):
            return None
        dtype, shape = str(header["dtype"]), tuple(header["shape"])
        if (dtype, shape) != expect or header["num_bytes"] != payload.nbytes:
            return OTHER_LAYOUT
        if got != PAYLOAD_ALIGN + payload.nbytes:
            return OTHER_LAYOUT  # short (cut, or a short read) or longer than its header says
        good, sums = _verified(header, payload, defer_sums)
        return DiskBlock(payload, dtype, shape, got, sums) if good else None
    except (ValueError, KeyError, TypeError):
        return None
