"""StopWhenGone, a run's model: it asks whether the run still holds before every model call and,
at most every interval, at the model's progress and token events, and stops with JobGone."""

from __future__ import annotations

import pytest

from tests.pipelines.echo_model import EchoModel
from worker.jobs.progress import JobGone
from worker.jobs.run_claim import StopWhenGone

MESSAGES = [{"role": "user", "content": "[p. 1]\nThe tenant pays the rent. More words follow."}]


class _Run:
    """Whether the run holds, and how often it was asked."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers, self.asked = answers, 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.answers.pop(0) if self.answers else True


def test_every_call_is_checked_first_and_a_gone_job_makes_no_call() -> None:
    echo = EchoModel()
    run = _Run([True, True, False])
    model = StopWhenGone(echo, run, interval_s=3600)  # events are never checked: calls only

    model.complete(MESSAGES, max_new_tokens=8)
    model.complete_many([MESSAGES], max_new_tokens=8)  # one by one: EchoModel has no batching
    with pytest.raises(JobGone):
        model.complete(MESSAGES, max_new_tokens=8)

    assert (run.asked, len(echo.prompts)) == (3, 2)


def test_a_job_gone_while_the_model_writes_stops_the_call_at_its_next_event() -> None:
    written: list[int] = []
    run = _Run([True, True, True, False])  # the call, its prefill event, two tokens, then gone
    model = StopWhenGone(EchoModel(), run, interval_s=0.0)

    with pytest.raises(JobGone):
        model.complete(
            MESSAGES, max_new_tokens=8, on_tokens=lambda done, _limit: written.append(done)
        )

    assert written == [1]  # the pipeline's own callback saw no token after the job was gone
    assert run.asked == 4
