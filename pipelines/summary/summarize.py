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

The hierarchical path's steps are pipelines.summary.hierarchical; progress and the cleaning of
what the model writes, pipelines.summary.writing.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from pipelines.inputs import DocumentInput
from pipelines.model_calls import CallLog, fits
from pipelines.prompts.templates import (
    choose_template,
    document_block,
    render_pages,
    render_span,
    section_messages,
    summary_messages,
)
from pipelines.protocols import ChatModel, Embedder
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.retrieval.ranking import PassageRanker
from pipelines.summary.hierarchical import combine, fitting_sections, section_text, supported_parts
from pipelines.summary.support import SUPPORTED, SentenceSupport, check_summary, counts
from pipelines.summary.writing import Progress, ProgressFn, PromptEchoes, WritingFn, cut_loop
from pipelines.summary.writing import WritingProgress as WritingProgress  # re-exported

logger = logging.getLogger(__name__)

_MIN_SECTION_NEW_TOKENS = 32


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
    echoes = PromptEchoes(DocumentSentences(document.pages))
    messages = summary_messages(
        document_block(document.title, render_pages(document.pages)), template
    )
    if fits(model, messages, max_new_tokens):
        text = calls.run(
            "summary",
            messages,
            max_new_tokens=max_new_tokens,
            on_progress=on_progress,
            on_tokens=Progress(None, total=1, on_writing=on_writing).writing("summary"),
        )
        logger.info("summary done: method=one_pass calls=%d", len(calls.calls))
        text, stats = cut_loop(text, calls.stats())
        text = echoes.clean(text)
        stats["num_prompt_sentences_dropped"] = echoes.num_dropped
        result = SummaryResult(text, "one_pass", 0, [], stats, template.name)
        checked = _check(result.text, document, echoes.sentences, index, embedder)
        return _with_support(result, checked)
    section_new = section_max_new_tokens or max(_MIN_SECTION_NEW_TOKENS, max_new_tokens // 2)
    sections = fitting_sections(document, model, template, section_new, max_section_tokens)
    progress = Progress(on_progress, total=len(sections) + 1, on_writing=on_writing)
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
    supported = supported_parts(parts, document, sentences, index, embedder)
    evidenced = [(first, last, " ".join(kept)) for first, last, kept in supported]
    said = evidenced or [part for part in parts if part[2]]
    if said:
        text = combine(
            document.title, template, said, model, calls, progress, echoes,
            max_new_tokens=max_new_tokens, group_new_tokens=section_new,
            max_levels=max_combine_levels,
        )  # fmt: skip
    else:  # every section summary was a prompt's words: nothing to combine
        progress.add(-1)
        text = ""
    text, stats = cut_loop(text, calls.stats())
    text = echoes.clean(text)
    stats["num_prompt_sentences_dropped"] = echoes.num_dropped
    stats["num_supported_section_sentences"] = sum(len(kept) for _, _, kept in supported)
    checked = _check(text, document, sentences, index, embedder)
    if supported and not any(c.status == SUPPORTED for c in checked):
        # The combine kept nothing the document supports: the sections' supported sentences,
        # each under its pages, are the summary instead.
        text = section_text(supported)
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


def _with_support(result: SummaryResult, checked: list[SentenceSupport]) -> SummaryResult:
    """The result with its checked sentences and their counts in its stats."""
    stats = {**result.stats, **counts(checked)}
    return dataclasses.replace(result, sentence_support=checked, stats=stats)
