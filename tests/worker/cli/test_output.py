"""The CLI's summary: a checked summary with no statement says so rather than print its
fragments; one from before the check is printed as written."""

from __future__ import annotations

import io

from rich.console import Console

from app.db.models import Summary
from worker.cli.output import print_summary


def _printed(summary: Summary) -> str:
    out = io.StringIO()
    print_summary(Console(file=out, width=100), summary)
    return out.getvalue()


def test_a_checked_summary_without_statements_says_so() -> None:
    fragments = Summary(text="ACME HOLDINGS LLC\nBy:\nName:", stats={"num_summary_sentences": 0})
    printed = _printed(fragments)
    assert "states nothing that can be checked against the document" in printed
    assert "ACME" not in printed


def test_a_summary_from_before_the_check_is_printed_as_written() -> None:
    assert "The rent is due monthly." in _printed(
        Summary(text="The rent is due monthly.", stats={})
    )
