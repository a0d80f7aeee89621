"""A job's progress while the model writes: the stages and their throttled commits, and, with the
real default model, a summary job whose row (read while the job runs) counts tokens written."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind
from app.db.session import make_engine
from app.migrate import upgrade
from app.services import jobs
from engine import EngineConfig, LLMEngine
from pipelines.summary.summarize import WritingProgress
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import progress as job_progress
from worker.jobs import summary as summary_run
from worker.model.adapter import EngineChatModel

MAX_NEW_TOKENS = 160
PAGES = [
    "Lease agreement.\nThe tenant pays rent of 1,200 dollars on the first day of each month. "
    "The landlord repairs the roof and the heating. The lease runs for two years.",
    "Termination.\nEither party may end the lease with 60 days of written notice. A tenant who "
    "leaves early pays two months of rent. The deposit is returned within 30 days.",
]


@pytest.fixture
def sessions(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'longdoc.db'}"
    upgrade(url)
    engine = make_engine(url)
    yield sessionmaker(bind=engine, expire_on_commit=False)
    engine.dispose()


def _new_job(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE)
        session.commit()
        return job.id


def _row(sessions: sessionmaker[Session], job_id: int) -> tuple[str | None, int, int]:
    with sessions() as session:
        job = session.get(Job, job_id)
        return job.stage, job.progress_done, job.progress_total


def test_writing_stages_name_the_step_and_the_calls_done() -> None:
    one_pass = WritingProgress("summary", 10, 512, 0, 1)
    sections = WritingProgress("sections", 40, 3072, 0, 13)
    combine = WritingProgress("combine", 5, 512, 12, 13)

    assert job_progress.writing_stage(one_pass) == "writing"
    assert job_progress.writing_stage(sections) == "writing sections (0 of 13 calls done)"
    assert job_progress.writing_stage(combine) == "combining (12 of 13 calls done)"


def test_writing_progress_is_throttled_but_its_end_always_committed(sessions) -> None:
    job_id = _new_job(sessions)
    writing = job_progress.SummaryWriting(sessions, job_id)

    writing(WritingProgress("summary", 1, 100, 0, 1))
    writing(WritingProgress("summary", 2, 100, 0, 1))  # within the interval: not committed
    assert _row(sessions, job_id) == ("writing", 1, 100)
    time.sleep(job_progress.PROGRESS_INTERVAL_S)
    writing(WritingProgress("summary", 50, 100, 0, 1))
    assert _row(sessions, job_id) == ("writing", 50, 100)
    writing(WritingProgress("summary", 100, 100, 0, 1))  # the end, at once
    assert _row(sessions, job_id) == ("writing", 100, 100)


def test_a_jobs_progress_is_written_at_most_once_a_second_whoever_reports_it(
    sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id, other_id = _new_job(sessions), _new_job(sessions)
    now = [100.0]
    monkeypatch.setattr(job_progress, "_clock", lambda: now[0])
    writes: list[str] = []
    event.listen(
        sessions.kw["bind"],
        "after_cursor_execute",
        lambda _c, _cur, statement, *_: (
            writes.append(statement) if statement.startswith("UPDATE jobs") else None
        ),
    )
    prefill = job_progress.ThrottledProgress(sessions, job_id, "summarizing")

    for step in range(100):  # two callbacks of one job, 100 reports each within 0.99 s
        now[0] = 100.0 + step * 0.0099
        prefill(step, 1000)
        job_progress.record_progress(sessions, job_id, "summarizing", step, 1000)
    assert len(writes) == 1
    job_progress.record_progress(sessions, other_id, "summarizing", 5, 1000)  # its own second
    assert len(writes) == 2
    now[0] = 101.0
    job_progress.record_progress(sessions, job_id, "summarizing", 500, 1000)
    job_progress.record_progress(sessions, job_id, "summarizing", 600, 1000)
    assert len(writes) == 3 and _row(sessions, job_id) == ("summarizing", 500, 1000)
    job_progress.record_progress(sessions, job_id, "writing", 1, 100)  # a new stage: at once
    job_progress.record_progress(sessions, job_id, "writing", 100, 100)  # its end: at once
    assert len(writes) == 5 and _row(sessions, job_id) == ("writing", 100, 100)


def test_a_deleted_job_stops_the_writing(sessions) -> None:
    job_id = _new_job(sessions)
    with sessions() as session:
        session.delete(session.get(Job, job_id))
        session.commit()

    with pytest.raises(job_progress.JobGone):
        job_progress.SummaryWriting(sessions, job_id)(WritingProgress("summary", 1, 9, 0, 1))


@pytest.mark.slow
def test_progress_of_a_summary_job_increases_while_it_decodes(
    sessions, tmp_path, count_tokens, converted_model_cache
) -> None:
    gguf = celery_support.default_gguf()
    config = EngineConfig(model_path=gguf, model_cache_dir=converted_model_cache, device="cpu")
    model = EngineChatModel(LLMEngine(config), "smollm2-135m-instruct")
    pdf = pdf_factory.text_pdf(tmp_path, PAGES, name="lease.pdf")
    stored = pdf.rename(tmp_path / f"{'0' * 64}.pdf")
    with sessions() as session:
        ingest = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(stored), "file_name": "lease.pdf", "then_summarize": True},
        )
        session.commit()
    outcome = runner_ingest.run_ingest(
        ingest.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=64),
        count_tokens=count_tokens,
    )
    (job_id,) = outcome.follow_up_job_ids
    done = threading.Event()
    outcomes: list[job_run.RunOutcome] = []

    def run() -> None:
        try:
            outcomes.append(
                summary_run.run_summary(
                    job_id,
                    sessions=sessions,
                    model_factory=lambda: model,
                    max_new_tokens=MAX_NEW_TOKENS,
                )
            )
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    seen: list[tuple[str | None, int, int]] = []
    while not done.is_set():  # the job row, read while the job runs
        row = _row(sessions, job_id)
        if not seen or row != seen[-1]:
            seen.append(row)
        time.sleep(0.02)
    thread.join(timeout=60)

    assert outcomes and outcomes[0].status == job_run.SUCCEEDED
    writing = [(done_, total) for stage, done_, total in seen if stage == "writing"]
    assert len(writing) >= 2, seen  # the row moved while the model wrote
    assert all(total == MAX_NEW_TOKENS for _, total in writing)
    written = [done_ for done_, _ in writing]
    assert written == sorted(written) and written[0] < written[-1]
    assert 0 < written[-1] <= MAX_NEW_TOKENS
    # Before writing, the prompt was read (prefill tokens, "summarizing").
    stages = [stage for stage, _, _ in seen]
    assert stages.index("summarizing") < stages.index("writing")
    assert _row(sessions, job_id)[0] == "done"
