"""The sentence filter that every model call's text goes through (pipelines/model_calls.py)."""

from __future__ import annotations

from pipelines.model_calls import MIN_REPEATED_SENTENCE_CHARS, drop_repeated_sentences
from pipelines.summary.summarize import summarize
from tests.pipelines.echo_model import EchoModel, filler_page, make_document

LOOP = "The Court of Appeals has dismissed a temporary restraining order."


def test_a_long_sentence_said_again_is_dropped_with_its_count() -> None:
    # As SmolLM2-135M looped on a court opinion: one sentence per line, then on one line.
    text = f"{LOOP}\n{LOOP}\n  {LOOP.upper()}  \nThe rent is due monthly. {LOOP} {LOOP}"
    assert drop_repeated_sentences(text) == (f"{LOOP}\nThe rent is due monthly.", 4)


def test_a_repeat_goes_with_its_own_citation_and_leaves_the_first_one_its_citation() -> None:
    text = f"Rent is 900 dollars. [p. 1] {LOOP} [p. 3] {LOOP} [p. 4]"
    assert drop_repeated_sentences(text) == (f"Rent is 900 dollars. [p. 1] {LOOP} [p. 3]", 1)


def test_short_sentences_blank_lines_and_spacing_are_kept() -> None:
    text = "Term:\nNot stated.\n\nRenewal:  Not stated.\n\n"
    assert len("Not stated.") < MIN_REPEATED_SENTENCE_CHARS
    assert drop_repeated_sentences(text) == (text, 0)


def test_a_summary_keeps_one_copy_of_a_looping_sentence_and_counts_the_rest() -> None:
    document = make_document([filler_page(n) for n in range(1, 4)], max_tokens=40)
    model = EchoModel(max_context_tokens=4096, extra_text=f" {LOOP} {LOOP} {LOOP}")
    result = summarize(document, model, max_new_tokens=300)
    assert result.text.count(LOOP) == 1
    assert result.text.startswith("Page 1 fact 1")  # what came before the loop is kept
    assert result.stats["num_repeated_sentences_dropped"] == 2
    assert result.stats["calls"][0]["num_repeated_sentences_dropped"] == 2
