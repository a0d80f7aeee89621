"""The CLI's summary: a checked summary with no statement, or none the document supports, says
so plainly (and why) rather than print its fragments, and points to the key facts and passages
quoted from the document; one from before the check is printed as written. The CLI's answer:
the three support states with the same labels and notes as the UI."""

from __future__ import annotations

import io

from rich.console import Console

from app.db.models import Answer, Summary
from app.services.answer_labels import MODEL_TEXT_TITLE
from worker.cli.output import print_answer, print_summary


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


QUOTE = {"page": 2, "text": "The tenant pays rent monthly.", "start_char": 0, "end_char": 29}
LEAD = [{"text": "Parties: Acme; Beta.", "status": "supported", "quotes": [QUOTE]}]


def test_a_summary_that_only_repeated_its_prompt_says_so_and_keeps_its_lead() -> None:
    echoed = Summary(
        text="",
        stats={"num_summary_sentences": 0, "num_prompt_sentences_dropped": 4},
        key_passages=[QUOTE],
        lead=LEAD,
    )
    printed = " ".join(_printed(echoed).split())
    assert "Parties: Acme; Beta. [p. 2]" in printed
    assert 'p. 2: "The tenant pays rent monthly."' in printed
    assert (
        "The model's summary states nothing that can be checked against the document: it "
        "repeated its own instructions, which are left out, and wrote no full sentence about "
        "the document. The key facts and key passages above are quoted from the document itself."
    ) in printed
    # Without facts or passages, it does not point to them.
    alone = " ".join(_printed(Summary(text="", stats=echoed.stats)).split())
    assert "repeated its own instructions" in alone and "above" not in alone


def test_a_summary_with_no_supported_sentence_says_so_plainly() -> None:
    unsupported = Summary(
        text="Rent is paid in gold.",
        stats={"num_summary_sentences": 1},
        sentence_support=[{"text": "Rent is paid in gold.", "status": "no_evidence", "quotes": []}],
        lead=LEAD,
    )
    printed = " ".join(_printed(unsupported).split())
    assert (
        "No sentence of the model's summary rests on a passage of the document; each is set "
        "apart below with the reason. The key facts above are quoted from the document itself."
    ) in printed
    assert "Rent is paid in gold. (no passage of the document states this)" in printed


def _printed_answer(answer: Answer) -> str:
    out = io.StringIO()
    print_answer(Console(file=out, width=200), answer)
    return " ".join(out.getvalue().split())


NOTICE = {"text": "Either party may end the lease with three months notice.", "page": 2}


def test_the_three_support_states_print_their_labels_and_what_is_missing() -> None:
    supported = Answer(answer="Ohio law governs [p. 3].", support="supported", quotes=[NOTICE],
                       cited_pages=[3], stats={}, unsupported_claims=[])  # fmt: skip
    partly = Answer(
        answer="Either party may end it with three months notice [p. 2].",
        support="partly_supported", quotes=[NOTICE], cited_pages=[2], unsupported_claims=[],
        stats={"support_missing": "Partly supported: it does not say whether it renews."},
    )  # fmt: skip
    unsupported = Answer(
        answer='"Either party may end the lease with three months notice." (quoted from p. 2)',
        support="unsupported", quotes=[NOTICE], cited_pages=[2], stats={},
        model_answer="It ends in 2031.", unsupported_claims=["2031"],
    )  # fmt: skip
    assert "Supported by the quoted text. The quotes state what the question asks" in (
        _printed_answer(supported)
    )
    assert (
        "Partly supported by the quoted text. Partly supported: it does not say whether it "
        "renews." in _printed_answer(partly)
    )
    printed = _printed_answer(unsupported)
    assert 'Not supported by the quoted text. The model\'s answer stated "2031"' in printed
    assert f"{MODEL_TEXT_TITLE}: It ends in 2031." in printed  # the UI's words for it


def test_an_answer_saved_before_the_meaning_check_still_prints() -> None:
    old = Answer(answer="Ohio.", support="unchecked", quotes=[], cited_pages=[], stats={},
                 unsupported_claims=[])  # fmt: skip
    assert "Not checked. Saved before answers were checked for meaning" in _printed_answer(old)
