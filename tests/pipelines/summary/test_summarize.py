from dataclasses import dataclass

import pytest

from pipelines.citations import parse_citations
from pipelines.errors import ContextTooSmallError
from pipelines.prompts.templates import render_pages
from pipelines.repetition import max_phrase_repeats
from pipelines.summary.summarize import summarize
from tests.pipelines.echo_model import (
    EchoCompletion,
    EchoModel,
    filler_page,
    first_sentence,
    make_document,
)

NUM_PAGES = 12


class Recorder(list):
    def append_pair(self, done: int, total: int) -> None:
        self.append((done, total))


@pytest.fixture
def long_document():
    return make_document([filler_page(n) for n in range(1, NUM_PAGES + 1)], max_tokens=40)


def document_tokens(document) -> int:
    return len(render_pages(document.pages).split())


def test_a_document_that_fits_is_summarized_in_one_pass(long_document) -> None:
    model = EchoModel(max_context_tokens=4096)
    progress = Recorder()
    result = summarize(long_document, model, max_new_tokens=300, on_progress=progress.append_pair)
    assert result.method == "one_pass"
    assert (result.num_sections, result.section_pages) == (0, [])
    assert len(model.prompts) == 1
    # The whole page-marked document went into the one prompt.
    assert render_pages(long_document.pages) in model.prompts[0][-1]["content"]
    assert parse_citations(result.text)[:3] == [1, 2, 3]
    assert result.stats["num_calls"] == 1 and result.stats["num_chunks"] >= 2
    # One-pass progress is the prefill in tokens, ending complete.
    assert progress[-1][0] == progress[-1][1] == result.stats["num_prompt_tokens"]


def test_a_longer_document_is_summarized_by_sections_then_combined(long_document) -> None:
    model = EchoModel(max_context_tokens=400)
    assert document_tokens(long_document) > 2 * model.max_context_tokens
    progress = Recorder()
    result = summarize(
        long_document,
        model,
        max_new_tokens=60,
        section_max_new_tokens=40,
        on_progress=progress.append_pair,
    )
    assert result.method == "hierarchical"
    assert result.num_sections == len(result.section_pages) >= 2
    steps = [call["step"] for call in result.stats["calls"]]
    assert steps == ["section"] * result.num_sections + ["combine"]
    # Sections are consecutive, cover every page, and each summary is labelled with its pages.
    firsts = [first for first, _ in result.section_pages]
    assert firsts == sorted(firsts) and firsts[0] == 1
    assert result.section_pages[-1][1] == NUM_PAGES
    combine_prompt = model.prompts[-1][-1]["content"]
    for (first, last), summary in zip(result.section_pages, result.section_summaries, strict=True):
        label = f"Page {first}" if first == last else f"Pages {first}-{last}"
        # Each section's sentences (all supported here), citing their quotes' pages.
        assert f"{label}: {summary.split(' [p.')[0]} [p. {first}]" in combine_prompt
        # Each section summary cites only pages of its own section.
        assert all(first <= page <= last for page in parse_citations(summary))
    # Progress counts calls: 0 of N first, then one per call, ending N of N.
    assert progress[0] == (0, result.num_sections + 1)
    assert progress[-1] == (result.stats["num_calls"], result.stats["num_calls"])
    assert [done for done, _ in progress] == list(range(len(progress)))


def test_summaries_that_do_not_fit_are_combined_in_groups(long_document) -> None:
    model = EchoModel(max_context_tokens=220)
    progress = Recorder()
    result = summarize(
        long_document,
        model,
        max_new_tokens=60,
        section_max_new_tokens=40,
        on_progress=progress.append_pair,
    )
    steps = [call["step"] for call in result.stats["calls"]]
    assert result.method == "hierarchical"
    assert "combine_group" in steps and steps[-1] == "combine"
    assert steps.count("combine") == 1
    assert progress[-1] == (len(steps), len(steps))
    totals = [total for _, total in progress]
    assert totals == sorted(totals) and totals[0] < totals[-1]


def test_combine_levels_are_bounded(long_document) -> None:
    model = EchoModel(max_context_tokens=220)
    with pytest.raises(ContextTooSmallError, match="too small to combine"):
        summarize(
            long_document, model, max_new_tokens=60, section_max_new_tokens=40,
            max_combine_levels=0,
        )  # fmt: skip


def test_max_section_tokens_caps_sections(long_document) -> None:
    model = EchoModel(max_context_tokens=10_000)
    capped = summarize(long_document, model, max_new_tokens=60, max_section_tokens=1)
    assert capped.method == "one_pass"  # the cap only matters when the document does not fit
    small = EchoModel(max_context_tokens=document_tokens(long_document))
    free = summarize(long_document, small, max_new_tokens=200)
    capped = summarize(long_document, EchoModel(small.max_context_tokens), max_new_tokens=200,
                       max_section_tokens=60)  # fmt: skip
    assert free.method == capped.method == "hierarchical"
    assert capped.num_sections > free.num_sections


def test_a_context_too_small_for_any_section_is_a_clear_error(long_document) -> None:
    with pytest.raises(ContextTooSmallError, match="context of 90 tokens"):
        summarize(long_document, EchoModel(max_context_tokens=90), max_new_tokens=40)


def test_stats_add_up_over_calls(long_document) -> None:
    model = EchoModel(max_context_tokens=document_tokens(long_document) // 2)
    result = summarize(long_document, model, max_new_tokens=120)
    calls = result.stats["calls"]
    assert result.stats["num_prompt_tokens"] == sum(c["num_prompt_tokens"] for c in calls)
    assert result.stats["num_chunks"] == sum(len(c["chunk_sizes"]) for c in calls)
    assert result.stats["model"] == "echo-test"


def test_writing_is_reported_while_the_model_writes_in_one_pass(long_document) -> None:
    model = EchoModel(max_context_tokens=4096)
    writing = []
    summarize(long_document, model, max_new_tokens=300, on_writing=writing.append)

    assert writing and {w.step for w in writing} == {"summary"}
    assert [w.written_tokens for w in writing] == list(range(1, len(writing) + 1))
    assert all((w.max_tokens, w.num_calls_done, w.num_calls) == (300, 0, 1) for w in writing)


def test_writing_by_sections_counts_the_calls_done(long_document) -> None:
    model = EchoModel(max_context_tokens=400)
    writing = []
    result = summarize(
        long_document,
        model,
        max_new_tokens=60,
        section_max_new_tokens=40,
        on_writing=writing.append,
    )

    steps = [w.step for w in writing]
    assert steps.index("sections") < steps.index("combine")
    sections = [w for w in writing if w.step == "sections"]
    combine = [w for w in writing if w.step == "combine"]
    assert all(w.num_calls_done == 0 and w.max_tokens == 40 for w in sections)
    # The combine call is written once every section is done.
    assert all(w.num_calls_done == result.num_sections for w in combine)
    assert all(w.num_calls == result.num_sections + 1 for w in writing)


class SectionsThatStray(EchoModel):
    """Section summaries that echo their instructions and invent a place beside the document's
    sentences; a combine that writes only what the document does not say."""

    def _answer(self, content: str) -> str:
        if "Combine these part summaries" in content:
            return "The parties chose the courts of Nevada."
        return super()._answer(content) + (
            " This is one part of a longer document. Disputes go to the courts of Nevada."
        )


def test_only_supported_section_sentences_are_combined(long_document) -> None:
    model = SectionsThatStray(max_context_tokens=400)
    result = summarize(long_document, model, max_new_tokens=60, section_max_new_tokens=60)

    assert result.method == "hierarchical" and result.num_sections >= 2
    combine_prompt = model.prompts[-1][-1]["content"]
    assert "Nevada" not in combine_prompt and "one part of a longer" not in combine_prompt
    assert "Page 1 fact 1 concerns topic1x1 in plain words, as item1x1. [p. 1]" in combine_prompt
    assert result.stats["num_supported_section_sentences"] >= result.num_sections
    # The combine said only what the document does not: the sections' supported sentences,
    # under their pages, are the summary instead, every one of them supported.
    assert result.stats["combine_replaced_by_sections"] is True
    assert "Nevada" not in result.text and result.text.startswith("Pages 1-")
    assert result.sentence_support and all(
        checked.status == "supported" for checked in result.sentence_support
    )
    assert result.stats["num_supported_sentences"] == len(result.sentence_support)


SIGNATURE_BLOCK = "ACME HOLDINGS LLC\nA Vermont corporation\nBy:\n\nName:\n\nTitle:\n\n"


@dataclass
class CopiesTheSignatureBlock(EchoModel):
    """Like the default model on a short contract that ends with its signature page: one true
    sentence, then the signature block again and again (each line too short for the engine's
    loop detector, which counts phrases line by line)."""

    def complete(self, messages, **kwargs) -> EchoCompletion:
        stats = super().complete(messages, **kwargs).stats
        first = first_sentence(messages[-1]["content"].split("[p. 1]\n", 1)[1])
        return EchoCompletion(f"{first} [p. 1]\n\n" + SIGNATURE_BLOCK * 6, stats)


def test_a_summary_that_copies_a_signature_block_is_cut_and_keeps_its_one_statement(
    long_document,
) -> None:
    result = summarize(long_document, CopiesTheSignatureBlock(), max_new_tokens=300)
    assert result.method == "one_pass"
    # The text ends before its loop: no phrase of five words a third time.
    assert max_phrase_repeats(result.text) <= 2 and result.stats["loop_cut_chars"] > 0
    # Headings, names and form lines are no sentences: the one statement is all that is checked.
    assert [c.text for c in result.sentence_support] == [
        "Page 1 fact 1 concerns topic1x1 in plain words, as item1x1."
    ]
    assert result.sentence_support[0].status == "supported"
