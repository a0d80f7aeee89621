"""The progress card's words for a job's stage: while the model writes, tokens and calls done."""

from __future__ import annotations

from app.db.models import JobKind, JobStatus
from ui.components.job_status import JobView


def _view(stage: str, done: int = 0, total: int = 0) -> JobView:
    return JobView(
        job_id=1,
        kind=JobKind.SUMMARIZE,
        status=JobStatus.RUNNING,
        stage=stage,
        done=done,
        total=total,
        error=None,
        document_id=2,
        follow_up_job_id=None,
    )


def test_writing_stages_show_tokens_and_the_calls_done() -> None:
    one_pass = _view("writing", 120, 512)
    sections = _view("writing sections (0 of 13 calls done)", 40, 3072)
    combine = _view("combining (12 of 13 calls done)", 5, 512)

    assert (one_pass.label, one_pass.unit) == ("Writing", " tokens")
    assert sections.label == "Writing section summaries (0 of 13 calls done)"
    assert combine.label == "Combining section summaries (12 of 13 calls done)"
    assert one_pass.fraction == 120 / 512


def test_other_stages_keep_their_labels_and_no_unit() -> None:
    assert (_view("summarizing", 3, 9).label, _view("summarizing").unit) == ("Summarizing", "")
    assert _view("something new").label == "Something new"
