"""A summary never states its prompt (pipelines.summary.summarize with pipelines.prompts.echo): a
model that writes back its section task, its combine task and a chat placeholder beside the
document's sentences has none of them combined, stored or checked; one that writes nothing
else leaves an empty summary that says so, and the stats count what was dropped."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pipelines.ingest.sentences import split_sentences
from pipelines.prompts.echo import overlaps_prompt
from pipelines.prompts.templates import TASK_SEPARATOR
from pipelines.summary.summarize import summarize
from pipelines.summary.support import summary_sentences
from tests.pipelines.echo_model import EchoModel, filler_page, make_document

NUM_PAGES = 12
PLACEHOLDER = "Paste your answer here."
# Pieces of each prompt the model below writes back, as they must never be stored.
ECHOED = (
    "one part",
    "Summarize this part",
    "Combine these part summaries",
    "Keep the page citations",
    "Do not add facts",
    "Summaries of consecutive parts",
    "Summarize this document",
    "Paste your answer",
)


@dataclass
class WritesItsPromptBack(EchoModel):
    """The echo model's sentences (the document's own), then the prompt's task, and for a
    combine its header too, as a small model does; then a placeholder. With `only_prompt`,
    nothing but the prompt and the placeholder."""

    only_prompt: bool = False
    echoes: list[str] = field(default_factory=list)  # what each call wrote of its prompt

    def _answer(self, content: str) -> str:
        head, task = content.rsplit(TASK_SEPARATOR, 1)
        echo = task
        if task.startswith("Combine"):
            echo = f"{head.splitlines()[0]}\n{task}"
        echo = f"{echo}\n{PLACEHOLDER}"
        self.echoes.append(echo)
        own = "" if self.only_prompt else super()._answer(content)
        return f"{own}\n{echo}"

    def complete(self, messages, *, max_new_tokens, **kwargs):
        completion = super().complete(messages, max_new_tokens=max_new_tokens, **kwargs)
        # The test needs whole sentences: a call cut at its token limit would not be.
        assert completion.stats["num_decode_tokens"] < max_new_tokens
        return completion

    def num_echoed_sentences(self) -> int:
        """The sentences of what it wrote back, as written: one line (the echo model writes
        words), where a header ending in ":" runs into the next sentence."""
        return sum(len(split_sentences(" ".join(echo.split()))) for echo in self.echoes)


@pytest.fixture
def long_document():
    return make_document([filler_page(n) for n in range(1, NUM_PAGES + 1)], max_tokens=40)


def _stored_texts(result) -> list[str]:
    return [result.text, *result.section_summaries, *(c.text for c in result.sentence_support)]


def _assert_nothing_of_the_prompt(result) -> None:
    for text in _stored_texts(result):
        assert not any(piece in text for piece in ECHOED), text
        assert not any(overlaps_prompt(sentence) for sentence in summary_sentences(text))


def test_section_and_combine_echoes_are_neither_combined_nor_stored(long_document) -> None:
    model = WritesItsPromptBack(max_context_tokens=600)
    result = summarize(long_document, model, max_new_tokens=200, section_max_new_tokens=150)

    assert result.method == "hierarchical" and result.num_sections >= 2
    combine_prompt = model.prompts[-1][-1]["content"].rsplit(TASK_SEPARATOR, 1)[0]
    assert "Combine these part summaries" in model.prompts[-1][-1]["content"]
    assert not any(piece in combine_prompt for piece in ECHOED[:2] + ECHOED[-1:])
    _assert_nothing_of_the_prompt(result)
    # What the document says is kept, supported, with its page.
    assert "Page 1 fact 1 concerns topic1x1 in plain words, as item1x1." in result.text
    assert result.sentence_support and all(
        checked.status == "supported" for checked in result.sentence_support
    )
    # Every sentence the model wrote back was dropped, and counted: each section's task and
    # placeholder, the combine's header, task and placeholder.
    assert len(model.echoes) == result.num_sections + 1
    assert result.stats["num_prompt_sentences_dropped"] == model.num_echoed_sentences()


def test_a_one_pass_echo_and_placeholder_are_dropped(long_document) -> None:
    model = WritesItsPromptBack()
    result = summarize(long_document, model, max_new_tokens=600)

    assert result.method == "one_pass"
    _assert_nothing_of_the_prompt(result)
    assert result.text.startswith("Page 1 fact 1 concerns topic1x1")
    assert result.stats["num_prompt_sentences_dropped"] == model.num_echoed_sentences() >= 4
    assert result.stats["num_supported_sentences"] == result.stats["num_summary_sentences"] > 0


def test_a_summary_of_nothing_but_its_prompt_is_empty_and_says_so(long_document) -> None:
    model = WritesItsPromptBack(max_context_tokens=400, only_prompt=True)
    progress: list[tuple[int, int]] = []
    result = summarize(
        long_document, model, max_new_tokens=80, section_max_new_tokens=80,
        on_progress=lambda done, total: progress.append((done, total)),
    )  # fmt: skip

    assert result.method == "hierarchical"
    assert result.text == "" and result.sentence_support == []
    assert result.section_summaries == [""] * result.num_sections
    # Nothing to combine: no combine call, and progress ends complete all the same.
    assert [call["step"] for call in result.stats["calls"]] == ["section"] * result.num_sections
    assert progress[-1] == (result.num_sections, result.num_sections)
    # Checked, and no sentence: the reader is told so (app.services.summary_sentences).
    assert result.stats["num_summary_sentences"] == 0
    assert result.stats["num_prompt_sentences_dropped"] == model.num_echoed_sentences()
