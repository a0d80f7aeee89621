"""Summarize a document: in one pass when it fits the model's context, else hierarchically.

One pass: the whole page-marked document and the template's instructions in one prompt; the engine
reads it with chunked prefill. Its prompt shares the document prefix with later questions
(pipelines.prompts.templates), so they reuse the cached KV blocks.

Hierarchical: the passages are cut into sections that fit (pipelines.sections), each section is
summarized and labelled with its pages ("Pages 4-9: ..."), and the section summaries are
combined. Evidence first: only the section sentences that rest on the document (pipelines.
summary_support), none said twice, go into the combine; when the combined summary keeps none
that do, those section sentences under their pages are the summary. When they are too long to
combine at once they are combined in groups, level by level, at most `max_combine_levels` levels
deep. The result says which path was taken.

Either way, a sentence that repeats a prompt ("This is one part of a longer contract.", "Paste
your answer here.") is dropped from whatever the model writes, a section summary, a group's or
the whole summary, before it is combined or stored (pipelines.prompts.echo; the stats count them).
Every sentence of the final summary is then checked against the document
(pipelines.summary.support): its quotes with their pages, and whether it is supported.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.errors import ContextTooSmallError
from pipelines.inputs import DocumentInput
from pipelines.model_calls import CallLog, fits
from pipelines.prompts.echo import drop_prompt_sentences
from pipelines.prompts.templates import (
    Template,
    choose_template,
    combine_messages,
    document_block,
    page_label,
    render_pages,
    render_span,
    section_messages,
    summary_messages,
)
from pipelines.protocols import ChatModel, Embedder
from pipelines.repetition import before_loop, is_looping
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.retrieval.ranking import PassageRanker
from pipelines.sections import Section, cut_sections, halve
from pipelines.summary.support import SUPPORTED, SentenceSupport, check_summary, counts

logger = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]
WritingFn = Callable[["WritingProgress"], None]
# Section budgets leave this many tokens spare for page labels and tokenizer differences.
_SAFETY_TOKENS = 16
_MIN_SECTION_NEW_TOKENS = 32
_MIN_GROUP_NEW_TOKENS = 16
# What a "Pages 12-19: " label and the blank line before it cost, at most.
_LABEL_TOKENS = 12


@dataclass(frozen=True)
class SummaryResult:
    """A summary and how it was made. One pass has no sections (0 and [])."""

    text: str
    method: str  # "one_pass" | "hierarchical"
    num_sections: int
    section_pages: list[tuple[int, int]]
    stats: dict[str, Any]
    template: str = ""
    section_summaries: list[str] = field(default_factory=list)
    # Every sentence of `text` with its quotes and verdict (pipelines.summary.support).
    sentence_support: list[SentenceSupport] = field(default_factory=list)


@dataclass(frozen=True)
class WritingProgress:
    """How far the model has written: the tokens of the current step's calls against the most
    they may write, and the model calls done of those planned so far (sections, then combine
    calls; one for a one-pass summary). Steps: "summary", "sections", "combine"."""

    step: str
    written_tokens: int
    max_tokens: int
    num_calls_done: int
    num_calls: int


def summarize(
    document: DocumentInput,
    model: ChatModel,
    *,
    max_new_tokens: int = 512,
    section_max_new_tokens: int | None = None,
    max_section_tokens: int | None = None,
    max_combine_levels: int = 4,
    on_progress: ProgressFn | None = None,
    on_writing: WritingFn | None = None,
    index: PassageRanker | None = None,
    embedder: Embedder | None = None,
) -> SummaryResult:
    """Summarize `document` with `model`, choosing the template by the document's kind, then
    check each sentence of the summary against the document (`index` ranks its passages for
    that, `embedder` compares meanings: pipelines.summary.support).

    Progress: in one pass, `on_progress(done, total)` is the model's prefill progress in prompt
    tokens. Hierarchically it counts model calls: sections done, then combine calls, out of the
    calls planned so far (the total grows if combining needs another level). `on_writing` gets
    the tokens written while the model decodes (WritingProgress), in both paths.
    `section_max_new_tokens` bounds each section summary (default half of `max_new_tokens`);
    `max_section_tokens` caps a section's text below what the context would allow.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    template = choose_template(document.kind, document.pages)
    calls = CallLog(model)
    echoes = _PromptEchoes(DocumentSentences(document.pages))
    messages = summary_messages(
        document_block(document.title, render_pages(document.pages)), template
    )
    if fits(model, messages, max_new_tokens):
        text = calls.run(
            "summary",
            messages,
            max_new_tokens=max_new_tokens,
            on_progress=on_progress,
            on_tokens=_Progress(None, total=1, on_writing=on_writing).writing("summary"),
        )
        logger.info("summary done: method=one_pass calls=%d", len(calls.calls))
        text, stats = _before_loop(text, calls.stats())
        text = echoes.clean(text)
        stats["num_prompt_sentences_dropped"] = echoes.num_dropped
        result = SummaryResult(text, "one_pass", 0, [], stats, template.name)
        checked = _check(result.text, document, echoes.sentences, index, embedder)
        return _with_support(result, checked)
    section_new = section_max_new_tokens or max(_MIN_SECTION_NEW_TOKENS, max_new_tokens // 2)
    sections = _fitting_sections(document, model, template, section_new, max_section_tokens)
    progress = _Progress(on_progress, total=len(sections) + 1, on_writing=on_writing)
    # Every section at once: the engine prefills and decodes them together.
    conversations = [
        section_messages(
            document_block(
                document.title, render_span(document.pages, section.start_char, section.end_char)
            ),
            template,
            section.first_page,
            section.last_page,
        )
        for section in sections
    ]
    texts = calls.run_many(
        "section",
        conversations,
        max_new_tokens=section_new,
        on_tokens=progress.writing("sections"),
    )
    parts = [
        (section.first_page, section.last_page, echoes.clean(text))
        for section, text in zip(sections, texts, strict=True)
    ]
    for _ in sections:  # one call each, done together
        progress.step()
    sentences = echoes.sentences
    # Evidence first: only the section sentences that rest on the document are combined.
    supported = _supported_parts(parts, document, sentences, index, embedder)
    evidenced = [(first, last, " ".join(kept)) for first, last, kept in supported]
    said = evidenced or [part for part in parts if part[2]]
    if said:
        text = _combine(
            document.title, template, said, model, calls, progress, echoes,
            max_new_tokens=max_new_tokens, group_new_tokens=section_new,
            max_levels=max_combine_levels,
        )  # fmt: skip
    else:  # every section summary was a prompt's words: nothing to combine
        progress.add(-1)
        text = ""
    text, stats = _before_loop(text, calls.stats())
    text = echoes.clean(text)
    stats["num_prompt_sentences_dropped"] = echoes.num_dropped
    stats["num_supported_section_sentences"] = sum(len(kept) for _, _, kept in supported)
    checked = _check(text, document, sentences, index, embedder)
    if supported and not any(c.status == SUPPORTED for c in checked):
        # The combine kept nothing the document supports: the sections' supported sentences,
        # each under its pages, are the summary instead.
        text = _section_text(supported)
        checked = _check(text, document, sentences, index, embedder)
        stats["combine_replaced_by_sections"] = True
    logger.info(
        "summary done: method=hierarchical sections=%d calls=%d", len(sections), len(calls.calls)
    )
    result = SummaryResult(
        text=text.strip(),
        method="hierarchical",
        num_sections=len(sections),
        section_pages=[(first, last) for first, last, _ in parts],
        stats=stats,
        template=template.name,
        section_summaries=[summary for _, _, summary in parts],
    )
    return _with_support(result, checked)


def _check(
    text: str,
    document: DocumentInput,
    sentences: DocumentSentences,
    index: PassageRanker | None,
    embedder: Embedder | None,
) -> list[SentenceSupport]:
    return check_summary(text, sentences, document.passages, index=index, embedder=embedder)


class _PromptEchoes:
    """Drops the sentences that repeat a prompt from each text the model writes
    (pipelines.prompts.echo), counting them for the stats."""

    def __init__(self, sentences: DocumentSentences) -> None:
        self.sentences = sentences
        self.num_dropped = 0

    def clean(self, text: str) -> str:
        kept, num_dropped = drop_prompt_sentences(text.strip(), document=self.sentences.text)
        self.num_dropped += num_dropped
        return kept.strip()


def _before_loop(text: str, stats: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The model's summary up to where it starts repeating a phrase of five words a third time
    (a loop the engine's detector let through, such as a signature block copied over and over,
    whose short lines it counts one by one); the stats say how much was cut."""
    text = text.strip()
    kept = before_loop(text).strip()
    if kept != text:
        stats = {**stats, "loop_cut_chars": len(text) - len(kept)}
    return kept, stats


def _with_support(result: SummaryResult, checked: list[SentenceSupport]) -> SummaryResult:
    """The result with its checked sentences and their counts in its stats."""
    stats = {**result.stats, **counts(checked)}
    return dataclasses.replace(result, sentence_support=checked, stats=stats)


def _supported_parts(
    parts: list[tuple[int, int, str]],
    document: DocumentInput,
    sentences: DocumentSentences,
    index: PassageRanker | None,
    embedder: Embedder | None,
) -> list[tuple[int, int, list[str]]]:
    """Each section summary's supported sentences (pipelines.summary.support), each citing the
    page of its quote, with the section's pages; sections with none are left out. A small
    model's section summary often names what the section does not say, and the combine would
    carry that into the whole summary."""
    kept = []
    said: set[str] = set()
    for first, last, text in parts:
        good: list[str] = []
        # summary_sentences has left out this section's own repeats and loop copies already.
        for checked in _check(text, document, sentences, index, embedder):
            if checked.status != SUPPORTED or checked.text in said:  # said in another section
                continue
            said.add(checked.text)
            # The page of the quote it rests on, checked, where the model's own may be wrong.
            good.append(f"{checked.text} [p. {checked.page}]")
        if good:
            kept.append((first, last, good))
    return kept


def _section_text(supported: list[tuple[int, int, list[str]]]) -> str:
    """The sections' supported sentences under their pages, as the summary, leaving out any
    sentence that would make the whole repeat a phrase a third time."""
    lines: list[str] = []
    for first, last, kept in supported:
        line: list[str] = []
        for sentence in kept:
            if not is_looping(" ".join([*lines, *line, sentence])):
                line.append(sentence)
        if line:
            lines.append(f"{page_label(first, last)}: {' '.join(line)}")
    return "\n".join(lines)


class _Progress:
    """Model calls done of those planned (on_progress), and tokens written (on_writing)."""

    def __init__(
        self, callback: ProgressFn | None, total: int, on_writing: WritingFn | None = None
    ) -> None:
        self.callback, self.done, self.total = callback, 0, total
        self.on_writing = on_writing
        self._report()

    def writing(self, step: str) -> Callable[[int, int], None] | None:
        """An on_tokens callback for the calls of `step`, or None when nobody listens."""
        if self.on_writing is None:
            return None
        on_writing = self.on_writing

        def on_tokens(written: int, limit: int) -> None:
            on_writing(WritingProgress(step, written, limit, self.done, self.total))

        return on_tokens

    def step(self) -> None:
        self.done += 1
        self._report()

    def add(self, num_calls: int) -> None:
        self.total += num_calls
        self._report()

    def _report(self) -> None:
        if self.callback is not None:
            self.callback(self.done, self.total)


def _fitting_sections(
    document: DocumentInput,
    model: ChatModel,
    template: Template,
    section_new: int,
    max_section_tokens: int | None,
) -> list[Section]:
    """Sections whose real prompts fit: cut by estimate, then measured; too long ones halved."""
    empty = section_messages(document_block(document.title, ""), template, 1, 1)
    budget = model.max_context_tokens - section_new - model.count_chat_tokens(empty)
    budget -= _SAFETY_TOKENS
    if max_section_tokens is not None:
        budget = min(budget, max_section_tokens)
    if budget < 1 or not document.passages:
        raise ContextTooSmallError(
            f"The model's context of {model.max_context_tokens} tokens is too small to summarize "
            "this document part by part."
        )
    pending = cut_sections(document.pages, document.passages, budget)
    done: list[Section] = []
    while pending:
        section = pending.pop(0)
        block = document_block(
            document.title, render_span(document.pages, section.start_char, section.end_char)
        )
        messages = section_messages(block, template, section.first_page, section.last_page)
        if fits(model, messages, section_new):
            done.append(section)
            continue
        halves = halve(section)
        if len(halves) == 1:
            raise ContextTooSmallError(
                f"A passage on page {section.first_page} does not fit the model's context of "
                f"{model.max_context_tokens} tokens with room for its summary."
            )
        pending[:0] = halves
    return done


def _combine(
    title: str | None,
    template: Template,
    parts: list[tuple[int, int, str]],
    model: ChatModel,
    calls: CallLog,
    progress: _Progress,
    echoes: _PromptEchoes,
    *,
    max_new_tokens: int,
    group_new_tokens: int,
    max_levels: int,
) -> str:
    """One summary from the section summaries, combining in groups while they do not fit.

    A group's summary is kept to a third of the room a combine prompt has, so that two of them
    and their combined summary always fit one prompt and every level shrinks the list.
    """
    room = model.max_context_tokens - model.count_chat_tokens(combine_messages(title, template, []))
    group_new_tokens = min(group_new_tokens, (room - 2 * _LABEL_TOKENS) // 3)
    for level in range(max_levels + 1):
        messages = combine_messages(title, template, parts)
        if fits(model, messages, max_new_tokens):
            text = calls.run(
                "combine",
                messages,
                max_new_tokens=max_new_tokens,
                on_tokens=progress.writing("combine"),
            )
            progress.step()
            return text
        if level == max_levels or group_new_tokens < _MIN_GROUP_NEW_TOKENS:
            break
        groups = _groups(title, template, parts, model, group_new_tokens)
        if len(groups) == len(parts):
            break
        merged = [group for group in groups if len(group) > 1]
        progress.add(len(merged))
        # A level's groups at once.
        texts = iter(
            calls.run_many(
                "combine_group",
                [combine_messages(title, template, group) for group in merged],
                max_new_tokens=group_new_tokens,
                on_tokens=progress.writing("combine"),
            )
        )
        next_parts = []
        for group in groups:
            if len(group) == 1:
                next_parts.append(group[0])
                continue
            # A group's summary is cleaned of prompt echoes before it is combined again.
            merged_text = echoes.clean(next(texts))
            next_parts.append((group[0][0], max(last for _, last, _ in group), merged_text))
        for _ in merged:
            progress.step()
        parts = next_parts
    raise ContextTooSmallError(
        f"The model's context of {model.max_context_tokens} tokens is too small to combine "
        f"{len(parts)} section summaries into one."
    )


def _groups(
    title: str | None,
    template: Template,
    parts: list[tuple[int, int, str]],
    model: ChatModel,
    max_new_tokens: int,
) -> list[list[tuple[int, int, str]]]:
    """Consecutive parts, greedily grouped so that each group's combine prompt fits."""
    groups: list[list[tuple[int, int, str]]] = []
    for part in parts:
        if groups and fits(
            model, combine_messages(title, template, [*groups[-1], part]), max_new_tokens
        ):
            groups[-1].append(part)
        else:
            groups.append([part])
    return groups
