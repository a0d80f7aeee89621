"""How fast the disk tier's block files come back into host memory, by reader threads: through
the disk tier's checked reads (`lower_hits`, as a load after a restart does: `checked`, the
reader naming the block it expects, as the tiers do, so a file is one preadv; `checked-general`,
the header read first, then the payload; `deferred`, files with "sum64x2" read as the tiers read
them with kv_device_checksums, the sums left to the device) and as bare `readinto` calls, from a
page cache just written (issue 24: >= 10 GB/s from a warm page cache).

Usage: python3 bench/kv_disk_read.py [--blocks 2048] [--threads 1 4 8 16] [--dir D] [--label L]
Block shape: the 8B shape's (2 MB of bf16 a block of 16 tokens). Host memory pinned on a GPU
machine, as the tiers' is. Results: bench/results/kv_disk_read_<label>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._report import meminfo  # noqa: E402
from engine.kv_tiers.block_file import payload_sums  # noqa: E402
from engine.kv_tiers.block_loads import lower_hits  # noqa: E402
from engine.kv_tiers.disk_tier import DiskTier  # noqa: E402

BLOCK_SHAPE = (2, 32, 16, 8, 128)  # [K/V, layers, tokens, KV heads, head dim] of Llama-3-8B


class Slots:
    """The next free row of the host buffer, for the reader threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0

    def reset(self) -> None:
        self._next = 0

    def next(self) -> int:
        with self._lock:
            self._next += 1
            return self._next - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=2048)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--dir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--sync", action="store_true", help="os.sync() after writing: no writeback beside the reads"
    )
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kv-disk-read-", dir=args.dir))
    pinned = torch.cuda.is_available()
    disk = DiskTier(root, "bench", max_bytes=1 << 50)
    keys = [(i * 7919 + 1, tuple(range(i % 1000, i % 1000 + 16))) for i in range(args.blocks)]
    source = torch.randn(BLOCK_SHAPE).to(torch.bfloat16)
    payload = memoryview(source.view(-1).view(torch.uint8).numpy())
    started = time.perf_counter()
    for block_hash, token_ids in keys:
        disk.write(block_hash, token_ids, payload, dtype="bfloat16", shape=BLOCK_SHAPE, tag="t")
    write_s = time.perf_counter() - started
    # The same blocks with device sums ("sum64x2"), for the `deferred` reads.
    summed = DiskTier(root, "bench-sums", max_bytes=1 << 50)
    sums = tuple(payload_sums(payload))
    for block_hash, token_ids in keys:
        summed.write(
            block_hash, token_ids, payload, dtype="bfloat16", shape=BLOCK_SHAPE, tag="t", sums=sums
        )
    sync_s = None
    if args.sync:
        started = time.perf_counter()
        os.sync()
        sync_s = time.perf_counter() - started
    host = torch.empty((args.blocks, *BLOCK_SHAPE), dtype=torch.bfloat16, pin_memory=pinned)
    num_bytes = host.numel() * host.element_size()
    block_bytes = num_bytes // args.blocks
    rows = []
    slots = Slots()
    for threads in args.threads:
        pool = ThreadPoolExecutor(threads)
        for kind in ("checked", "checked-general", "deferred", "readinto"):
            host.zero_()
            slots.reset()

            expected = None
            if kind in ("checked", "deferred"):
                expected = ("bfloat16", BLOCK_SHAPE, block_bytes)
            tier = summed if kind == "deferred" else disk

            def read(
                block_hash: int,
                token_ids: tuple[int, ...],
                into: torch.Tensor | None,
                expect: tuple[str, tuple[int, ...], int] | None = expected,
                tier: DiskTier = tier,
            ) -> torch.Tensor | None:
                kept = []

                def take(dtype: str, shape: tuple[int, ...], size: int) -> memoryview:
                    kv = into if into is not None else host[slots.next()]
                    kept.append(kv)
                    return memoryview(kv.view(-1).view(torch.uint8).numpy())

                block = tier.read(block_hash, token_ids, take, expect, defer_sums=tier is summed)
                assert block is None or (block.sums is not None) == (tier is summed)
                return kept[0] if block is not None else None

            def bare(index: int) -> None:
                path = root / disk.relative_path(keys[index][0])
                with open(path, "rb") as file:
                    file.readinto(memoryview(host[index].view(-1).view(torch.uint8).numpy()))

            started = time.perf_counter()
            if kind != "readinto":
                waited = {"cpu": 0.0, "disk": 0.0}
                hits = lower_hits(
                    keys,
                    cpu=None,
                    disk=tier,
                    read_disk=read,
                    pool=pool,
                    waited=waited,
                    reserve=lambda _hash: host[slots.next()],  # in key order, as the tiers do
                )
                num_read = sum(1 for _ in hits)
                assert num_read == args.blocks, num_read
            else:
                list(pool.map(bare, range(args.blocks)))
            seconds = time.perf_counter() - started
            rows.append(
                {
                    "threads": threads,
                    "kind": kind,
                    "seconds": seconds,
                    "gb_per_s": num_bytes / seconds / 1e9,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        pool.shutdown()
    result = {
        "blocks": args.blocks,
        "bytes": num_bytes,
        "pinned": pinned,
        "write_s": write_s,
        "sync_s": sync_s,
        "cpu_count": os.cpu_count(),
        "memory": meminfo(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "rows": rows,
    }
    shutil.rmtree(root, ignore_errors=True)
    if args.label:
        out = args.out_dir / f"kv_disk_read_{args.label}.json"
        out.write_text(json.dumps(result, indent=2))
        print(f"wrote {out}", file=sys.stderr)
    else:
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}))


if __name__ == "__main__":
    main()
