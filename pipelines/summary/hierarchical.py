"""The hierarchical path of pipelines.summary.summarize, for a document that does not fit the
model's context in one prompt: sections whose prompts fit, the section sentences that rest on the
document, and the combine of the section summaries, in groups level by level while they do not
fit one prompt."""

from __future__ import annotations

from pipelines.errors import ContextTooSmallError
from pipelines.inputs import DocumentInput
from pipelines.model_calls import CallLog, fits
from pipelines.prompts.templates import (
    Template,
    combine_messages,
    document_block,
    page_label,
    render_span,
    section_messages,
)
from pipelines.protocols import ChatModel, Embedder
from pipelines.repetition import is_looping
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.retrieval.ranking import PassageRanker
from pipelines.sections import Section, cut_sections, halve
from pipelines.summary.support import SUPPORTED, check_summary
from pipelines.summary.writing import Progress, PromptEchoes

# Section budgets leave this many tokens spare for page labels and tokenizer differences.
_SAFETY_TOKENS = 16
_MIN_GROUP_NEW_TOKENS = 16
# What a "Pages 12-19: " label and the blank line before it cost, at most.
_LABEL_TOKENS = 12


def fitting_sections(
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


def supported_parts(
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
        for checked in check_summary(
            text, sentences, document.passages, index=index, embedder=embedder
        ):
            if checked.status != SUPPORTED or checked.text in said:  # said in another section
                continue
            said.add(checked.text)
            # The page of the quote it rests on, checked, where the model's own may be wrong.
            good.append(f"{checked.text} [p. {checked.page}]")
        if good:
            kept.append((first, last, good))
    return kept


def section_text(supported: list[tuple[int, int, list[str]]]) -> str:
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


def combine(
    title: str | None,
    template: Template,
    parts: list[tuple[int, int, str]],
    model: ChatModel,
    calls: CallLog,
    progress: Progress,
    echoes: PromptEchoes,
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
