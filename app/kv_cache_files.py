"""A document's KV blocks in the engine's disk tier: their tag, and their deletion.

The worker's engine keeps the KV of a document's prompts under the tag document_cache_tag(id).
Deleting a document calls forget_document_kv, which takes the steps of
engine/kv_tiers/tombstones.py (written out here because app imports no engine; a test holds the
two to the same result): the tombstone forgotten/<tag> first, so no worker keeps another block
of it; then the block files tags/<tag>.list names are written into the tombstone, with a last
line "done", and deleted. Every worker sharing the folder reads the finished tombstone within a
second and drops those blocks from its GPU and CPU tiers too. Workers' memory, disk tier on or
off, is also reached by the broadcast of app.services.dispatch.tell_workers_to_forget_document_kv.
"""

from __future__ import annotations

import re
from pathlib import Path

_BLOCK_PATH = re.compile(r"^[0-9a-f]{32}/[0-9a-f]{2}/[0-9a-f]{16}\.kv$")


def document_cache_tag(document_id: int) -> str:
    return f"document-{int(document_id)}"


def forget_document_kv(*, kv_cache_dir: Path | None, document_id: int) -> int:
    """Delete the document's KV block files under kv_cache_dir (None: no disk tier, nothing to
    do) and stop workers from keeping any more. Returns the number of files listed for it."""
    if kv_cache_dir is None:
        return 0
    root = Path(kv_cache_dir)
    tag = document_cache_tag(document_id)
    forgotten = root / "forgotten"
    forgotten.mkdir(parents=True, exist_ok=True)
    tombstone = forgotten / tag
    tombstone.touch()
    listing = root / "tags" / f"{tag}.list"
    try:
        lines = listing.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    listed = sorted({line for line in lines if _BLOCK_PATH.match(line)})
    with tombstone.open("a", encoding="utf-8") as file:
        file.write("".join(f"{relative}\n" for relative in listed) + "done\n")
    for relative in listed:
        (root / relative).unlink(missing_ok=True)
    listing.unlink(missing_ok=True)
    return len(listed)
