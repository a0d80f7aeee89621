"""The inbox against hostile and unlucky entries: links (to a file, to a PDF outside, to a
folder), oversized and fake PDFs, old processed files, and refused copies in the store."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from app.db.models import Job, JobStatus
from tests.pipelines import pdf_factory
from worker.inbox import scan_inbox
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run

DAY_S = 24 * 3600


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


def settle(*paths: Path) -> None:
    """Age entries past the scan's settling time (links themselves, not their targets)."""
    past = time.time() - 60
    for path in paths:
        os.utime(path, (past, past), follow_symlinks=False)


def failed_jobs(sessions) -> dict[str, tuple[str, str]]:
    with sessions() as session:
        rows = session.scalars(select(Job).where(Job.status == JobStatus.FAILED)).all()
        return {j.params["file_name"]: (j.error_code, j.error) for j in rows}


def stored_files(files_dir: Path) -> list[Path]:
    return [p for p in files_dir.rglob("*") if p.is_file()] if files_dir.exists() else []


def test_links_are_never_followed_and_are_removed(sessions, inbox: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    pdf = pdf_factory.text_pdf(outside, ["A contract outside the inbox."], name="elsewhere.pdf")
    for name, target in (("x.pdf", secret), ("y.pdf", pdf), ("folder.pdf", outside)):
        (inbox / name).symlink_to(target)
    settle(secret, pdf, *(inbox / name for name in ("x.pdf", "y.pdf", "folder.pdf")))
    files_dir = tmp_path / "files"

    queued = scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=files_dir)

    assert queued == []
    assert stored_files(files_dir) == []  # no copy of /etc/passwd's stand-in, nor of the PDF
    assert sorted(p.name for p in inbox.iterdir()) == ["processed", "refused"]
    assert secret.read_text().startswith("root:") and pdf.exists()  # targets untouched
    refused = failed_jobs(sessions)
    assert set(refused) == {"x.pdf", "y.pdf", "folder.pdf"}
    assert all(code == "symbolic_link" for code, _ in refused.values())
    assert "never follows links" in refused["x.pdf"][1]


def test_size_and_type_are_checked_before_copying(sessions, inbox: Path, tmp_path: Path) -> None:
    big = inbox / "big.pdf"
    big.write_bytes(b"%PDF-1.7\n" + b"0" * 300_000)
    fake = pdf_factory.not_a_pdf(inbox, name="letter.pdf")
    settle(big, fake)
    files_dir = tmp_path / "files"

    queued = scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=files_dir, max_bytes=100_000)

    assert queued == []
    assert stored_files(files_dir) == []
    assert sorted(p.name for p in (inbox / "refused").iterdir()) == ["big.pdf", "letter.pdf"]
    assert not big.exists() and not fake.exists()  # out of the inbox: not retried every scan
    refused = failed_jobs(sessions)
    assert refused["big.pdf"][0] == "too_large"
    assert refused["letter.pdf"][0] == "not_a_pdf"
    assert "refused/ folder" in refused["big.pdf"][1]


def test_processed_and_refused_files_are_pruned_by_age(
    sessions, inbox: Path, tmp_path: Path
) -> None:
    for folder in ("processed", "refused"):
        (inbox / folder).mkdir()
        old = inbox / folder / "old.pdf"
        old.write_bytes(b"%PDF-1.4 old")
        os.utime(old, (time.time() - 40 * DAY_S,) * 2)
        (inbox / folder / "recent.pdf").write_bytes(b"%PDF-1.4 recent")
    # A file written long ago but dropped just now: its age counts from when it was processed.
    ancient = inbox / "ancient.pdf"
    ancient.write_bytes(b"%PDF-1.4 ancient")
    os.utime(ancient, (time.time() - 400 * DAY_S,) * 2)

    queued = scan_inbox(
        sessions=sessions, inbox_dir=inbox, files_dir=tmp_path / "files", keep_s=30 * DAY_S
    )
    scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=tmp_path / "files", keep_s=30 * DAY_S)

    assert len(queued) == 1
    assert sorted(p.name for p in (inbox / "processed").iterdir()) == ["ancient.pdf", "recent.pdf"]
    assert sorted(p.name for p in (inbox / "refused").iterdir()) == ["recent.pdf"]


def test_a_processed_folder_that_is_a_link_is_replaced_not_followed(
    sessions, inbox: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    kept = precious / "old-report.pdf"
    kept.write_bytes(b"%PDF-1.4 keep me")
    os.utime(kept, (time.time() - 400 * DAY_S,) * 2)
    (inbox / "processed").symlink_to(precious)
    pdf = inbox / "new.pdf"
    pdf.write_bytes(b"%PDF-1.4 new")
    settle(pdf)

    scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=tmp_path / "files", keep_s=DAY_S)

    assert kept.exists()  # not pruned through the link
    assert sorted(p.name for p in precious.iterdir()) == ["old-report.pdf"]
    assert (inbox / "processed").is_dir() and not (inbox / "processed").is_symlink()
    assert [p.name for p in (inbox / "processed").iterdir()] == ["new.pdf"]


def test_a_refused_ingest_leaves_no_copy_in_the_store(
    sessions, inbox: Path, tmp_path: Path, count_tokens
) -> None:
    damaged = pdf_factory.garbage_pdf(inbox, name="damaged.pdf")
    good = pdf_factory.text_pdf(inbox, ["The tenant pays the rent monthly."], name="good.pdf")
    settle(damaged, good)
    files_dir = tmp_path / "files"
    options = IngestOptions(files_dir=files_dir)
    job_ids = scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=files_dir)
    assert len(stored_files(files_dir)) == 2

    outcomes = [
        runner_ingest.run_ingest(
            job_id, sessions=sessions, options=options, count_tokens=count_tokens
        )
        for job_id in job_ids
    ]

    assert sorted(o.status for o in outcomes) == [job_run.FAILED, job_run.SUCCEEDED]
    (left,) = stored_files(files_dir)  # the damaged file's copy is gone, the good one stays
    with sessions() as session:
        good_job = next(session.get(Job, o.job_id) for o in outcomes if o.status == "succeeded")
        assert good_job.params["path"] == str(left)
