"""Forgetting a tag (a deleted document) in a disk tier's folder, for every process sharing it.

forgotten/<tag> is the tombstone: written first (from then on no writer keeps a block for the
tag), then it receives the block files tags/<tag>.list names and a last line "done", then those
files and the list are deleted. A worker that finds a finished tombstone drops the blocks it
names from its GPU and CPU tiers too, whoever loaded them. app/kv_cache_files.py does the same
steps without the engine (app imports no engine); tests/engine/kv_tiers/test_disk_tier.py holds
the two to the same result.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

TAGS_DIR, FORGOTTEN_DIR = "tags", "forgotten"
DONE_LINE = "done"
BLOCK_PATH = re.compile(r"^[0-9a-f]{32}/[0-9a-f]{2}/[0-9a-f]{16}\.kv$")


def forget_tag_files(root: Path, tag: str) -> list[str]:
    """Tombstone tag under root and delete the block files listed for it (in every namespace).
    Returns the listed block paths, relative to root."""
    root = Path(root)
    forgotten = root / FORGOTTEN_DIR
    forgotten.mkdir(parents=True, exist_ok=True)
    tombstone = forgotten / tag
    tombstone.touch()
    listing = root / TAGS_DIR / f"{tag}.list"
    try:
        lines = listing.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    listed = sorted({line for line in lines if BLOCK_PATH.match(line)})
    with tombstone.open("a", encoding="utf-8") as file:
        file.write("".join(f"{relative}\n" for relative in listed) + f"{DONE_LINE}\n")
    for relative in listed:
        (root / relative).unlink(missing_ok=True)
    listing.unlink(missing_ok=True)
    return listed


def forgotten_tags(root: Path) -> set[str]:
    try:
        return set(os.listdir(Path(root) / FORGOTTEN_DIR))
    except OSError:
        return set()


def read_tombstone(root: Path, tag: str) -> list[str] | None:
    """The block paths a finished tombstone names; None while its deletion is under way."""
    try:
        lines = (Path(root) / FORGOTTEN_DIR / tag).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if DONE_LINE not in lines:
        return None
    return [line for line in lines if BLOCK_PATH.match(line)]
