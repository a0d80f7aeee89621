"""Text bombs end to end: `ingest_file` (parse child, split, token count, store) in a child
process whose address space is capped (RLIMIT_AS) a fixed amount above what it holds once
started. A bomb is refused with a sentence and the job ends; the largest shape the caps accept is
split and stored within the cap. bench/results/text_bombs.md has the full-size measurements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.migrate import upgrade
from tests.pipelines import pdf_factory
from worker.model.source import find_default_gguf

REPO = Path(__file__).resolve().parents[3]
MiB = 1024 * 1024
# Runs in the capped child. argv: pdf, database url, files dir, model cache, headroom MiB, caps.
_CHILD = r"""
import json, resource, sys
from dataclasses import replace
from pathlib import Path
from sqlalchemy.orm import sessionmaker
from app.db.session import make_engine
from pipelines.documents import PageText
from pipelines.ingest.limits import ParseLimits
from pipelines.ingest.split import split_into_passages
from worker.ingest.store import IngestOptions
from worker.jobs.ingest import ingest_file
from worker.model.tokens import token_counter_for

pdf, url, files, cache, gguf, headroom_mb, page_cap, document_cap = sys.argv[1:]
count_tokens = token_counter_for(Path(gguf), Path(cache))
# Warm up what every ingest holds (the tokenizer's threads, the segmenter's model) first.
split_into_passages([PageText(1, "A first sentence. A second one.")], count_tokens=count_tokens)
with open("/proc/self/statm") as statm:
    size = int(statm.read().split()[0]) * resource.getpagesize()
cap = size + int(headroom_mb) * 1024 * 1024
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
limits = ParseLimits(max_page_chars=int(page_cap), max_document_chars=int(document_cap))
engine = make_engine(url)
outcome = ingest_file(
    Path(pdf),
    sessions=sessionmaker(bind=engine, expire_on_commit=False),
    options=IngestOptions(files_dir=Path(files), limits=limits),
    count_tokens=count_tokens,
)
from app.db.models import Job
with sessionmaker(bind=engine)() as session:
    job = session.get(Job, outcome.job_id)
    print(json.dumps({"status": outcome.status, "code": outcome.error_code,
                      "reason": outcome.reason, "num_passages": outcome.num_passages,
                      "job_status": job.status.value}))
"""


def ingest_under_cap(
    tmp_path: Path,
    pdf: Path,
    model_cache_dir: Path,
    *,
    headroom_mb: int,
    page_cap: int = 100_000,
    document_cap: int = 10_000_000,
) -> dict:
    url = f"sqlite:///{tmp_path / 'capped.db'}"
    upgrade(url)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(pdf), url, str(tmp_path / "files"),
         str(model_cache_dir), str(find_default_gguf()), str(headroom_mb), str(page_cap),
         str(document_cap)],
        capture_output=True, cwd=REPO, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"the capped ingest died (rc {done.returncode}): {done.stderr.decode()[-2000:]}"
    )
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_a_text_bomb_is_refused_and_the_parent_stays_within_its_cap(
    tmp_path: Path, model_cache_dir: Path, count_tokens
) -> None:
    # Issue 15's shape: one compressed stream drawn on two pages (10 million characters here).
    bomb = pdf_factory.amplified_pdf(tmp_path, num_pages=2, chars_per_page=5_000_000, lines=False)
    assert bomb.stat().st_size < 100_000

    reply = ingest_under_cap(tmp_path, bomb, model_cache_dir, headroom_mb=1024)

    assert reply["status"] == "refused"
    assert reply["code"] == "too_much_text"
    assert reply["reason"].startswith("Page 1 of this PDF gives more than 100,000 characters")
    assert reply["job_status"] == "failed"  # the job ended; not left "running"


@pytest.mark.slow
def test_the_largest_pages_the_caps_accept_are_stored_within_the_cap(
    tmp_path: Path, model_cache_dir: Path, count_tokens
) -> None:
    # 16 pages just under the page cap, four-character sentences: the splitter's worst shape.
    # Sixteen of them a text operator: the same text, and pypdf reads it in a tenth of the time
    # (one operator a sentence took it about a minute of this test's on CI's machine).
    pdf = pdf_factory.amplified_pdf(
        tmp_path, num_pages=16, chars_per_page=99_000, lines=False, sentence=b"Go. " * 16
    )

    reply = ingest_under_cap(tmp_path, pdf, model_cache_dir, headroom_mb=512)

    assert reply["status"] == "stored", reply["reason"]
    assert reply["num_passages"] > 1000
