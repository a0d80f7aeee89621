"""One block file of the disk tier: a header, then the block's KV bytes.

  b"LDKV\\x01" | header length (4 bytes, little-endian) | header (JSON: namespace, chain hash,
  token ids, dtype, shape, crc32 and length of the payload) | payload

A file is used only when all of it checks out: the magic, the header, the namespace, the hash
and token ids asked for, the payload's length and its crc32.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

MAGIC = b"LDKV\x01"


@dataclass
class DiskBlock:
    payload: memoryview
    dtype: str
    shape: tuple[int, ...]
    num_bytes: int  # the file's size


def encode_head(
    namespace: str,
    block_hash: int,
    token_ids: tuple[int, ...],
    payload: memoryview,
    dtype: str,
    shape: tuple[int, ...],
) -> bytes:
    """Everything the file holds before the payload."""
    header = json.dumps(
        {
            "namespace": namespace,
            "hash": block_hash,
            "token_ids": list(token_ids),
            "dtype": dtype,
            "shape": list(shape),
            "crc32": zlib.crc32(payload),
            "num_bytes": payload.nbytes,
        }
    ).encode()
    return MAGIC + len(header).to_bytes(4, "little") + header


def parse_block(
    data: bytearray, namespace: str, block_hash: int, token_ids: tuple[int, ...]
) -> DiskBlock | None:
    """The block in data if it is whole and what its name says; else None."""
    try:
        if not data.startswith(MAGIC):
            return None
        start = len(MAGIC) + 4
        header_len = int.from_bytes(data[len(MAGIC) : start], "little")
        header = json.loads(data[start : start + header_len])
        payload = memoryview(data)[start + header_len :]
        if (
            header["namespace"] != namespace
            or header["hash"] != block_hash
            or tuple(header["token_ids"]) != token_ids
            or header["num_bytes"] != payload.nbytes
            or header["crc32"] != zlib.crc32(payload)
        ):
            return None
        return DiskBlock(payload, str(header["dtype"]), tuple(header["shape"]), len(data))
    except (ValueError, KeyError, TypeError):
        return None
