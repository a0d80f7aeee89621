"""Prompt templates and the page-marked rendering of documents that every prompt is built from.

Prompt layout, the same for summaries and answers, so that the engine's prefix cache works:

1. a system message that never changes (`SYSTEM_PROMPT`),
2. a user message that starts with the document block (`document_block`: title, then each page
   as "[p. N]" and its text) and ends with the task: the summary instructions or the question.

Rendering is a pure function of the pages, so the same document always renders to the same string,
hence the same tokens, and that block comes before anything that depends on the task. A second
question about a document that fits the context therefore shares every token up to the task with
the first question (and with the one-pass summary) and only the question is computed again.
The "[p. N]" markers are also what lets the model cite pages in the same form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipelines import kinds
from pipelines.documents import PageText, Passage, document_text, page_spans
from pipelines.ingest.classify import guess_subkind

SYSTEM_PROMPT = (
    "You are LongDoc, a careful assistant for legal and medical documents. "
    "Use only facts stated in the document you are given. "
    "Each page of the document starts with a marker such as [p. 3]; "
    "cite the pages you use in that form, for example [p. 3]."
)
# Between the document block and the task: a visible rule so the model sees where the text ends.
TASK_SEPARATOR = "\n\n---\n"
# Between two retrieved spans of text that are not next to each other in the document.
GAP_MARKER = "[...]"


@dataclass(frozen=True)
class Template:
    """What a summary of one kind of document must cover."""

    name: str
    label: str
    topics: tuple[str, ...]


CONTRACT = Template(
    "contract",
    "contract",
    ("parties", "term", "obligations", "payment", "termination", "governing law"),
)
COURT_OPINION = Template(
    "court_opinion",
    "court opinion",
    (
        "the court",
        "the parties",
        "the question decided",
        "the outcome (affirmed, reversed or dismissed)",
        "the reasoning",
    ),
)
MEDICAL = Template(
    "medical",
    "medical document",
    ("indication", "dosing", "contraindications", "warnings", "findings"),
)
GENERAL = Template("general", "document", ("purpose", "main points", "conclusions"))
TEMPLATES = {t.name: t for t in (CONTRACT, COURT_OPINION, MEDICAL, GENERAL)}


def choose_template(kind: str, pages: Sequence[PageText]) -> Template:
    """The template for a document: by kind, and for "legal" by its sub-kind, opinion or
    contract (pipelines/ingest/classify.py's guess, the one that picks its key-fact schema too; no
    cues at all means contract, the more common upload)."""
    if kind == kinds.MEDICAL:
        return MEDICAL
    if kind != kinds.LEGAL:
        return GENERAL
    return COURT_OPINION if guess_subkind(kind, pages) == kinds.OPINION else CONTRACT


def page_label(first_page: int, last_page: int) -> str:
    return f"Page {first_page}" if first_page == last_page else f"Pages {first_page}-{last_page}"


def render_span(pages: Sequence[PageText], start: int, end: int) -> str:
    """`document_text(pages)[start:end]` with a "[p. N]" line before the part on each page."""
    text = document_text(pages)
    parts = []
    for number, page_start, page_end in page_spans(pages):
        lo, hi = max(start, page_start), min(end, page_end)
        piece = text[lo:hi].strip() if lo < hi else ""
        if piece:
            parts.append(f"[p. {number}]\n{piece}")
    return "\n\n".join(parts)


def render_pages(pages: Sequence[PageText]) -> str:
    """The whole document, page-marked; deterministic (the prefix-cache property rests on it)."""
    return render_span(pages, 0, len(document_text(pages)))


def render_passages(pages: Sequence[PageText], passages: Sequence[Passage]) -> str:
    """The given passages in document order, page-marked, touching ones merged, gaps shown."""
    text = document_text(pages)
    spans: list[list[int]] = []
    for passage in sorted(passages, key=lambda p: (p.start_char, p.end_char)):
        if spans and (
            passage.start_char <= spans[-1][1]
            or not text[spans[-1][1] : passage.start_char].strip()
        ):
            spans[-1][1] = max(spans[-1][1], passage.end_char)
        else:
            spans.append([passage.start_char, passage.end_char])
    return f"\n\n{GAP_MARKER}\n\n".join(render_span(pages, start, end) for start, end in spans)


def document_block(title: str | None, body: str) -> str:
    header = f"Document: {title.strip()}" if title and title.strip() else "Document:"
    return f"{header}\n\n{body}"


def _messages(user_content: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_content},
    ]


def _topics(template: Template) -> str:
    return ", ".join(template.topics)


def summary_messages(block: str, template: Template) -> list[dict[str, str]]:
    """One-pass summary of the whole document; shares its prefix with `question_messages`."""
    task = (
        f"Summarize this {template.label} in a few short paragraphs. "
        f"Cover, where the text states them: {_topics(template)}. "
        "Cite pages as [p. N]. Do not add facts that are not in the text."
    )
    return _messages(block + TASK_SEPARATOR + task)


def section_messages(
    block: str, template: Template, first_page: int, last_page: int
) -> list[dict[str, str]]:
    """Summary of one section (part of a longer document) for the hierarchical path."""
    where = page_label(first_page, last_page).lower()
    task = (
        f"This is one part ({where}) of a longer {template.label}. Summarize this part briefly. "
        f"Cover, where the text states them: {_topics(template)}. "
        "Cite pages as [p. N]. Do not add facts that are not in the text."
    )
    return _messages(block + TASK_SEPARATOR + task)


def combine_messages(
    title: str | None, template: Template, parts: Sequence[tuple[int, int, str]]
) -> list[dict[str, str]]:
    """Combine section summaries, each given as (first page, last page, summary text)."""
    lines = [f"{page_label(first, last)}: {text.strip()}" for first, last, text in parts]
    header = "Summaries of consecutive parts of " + (
        f"the {template.label} {title.strip()!r}:" if title and title.strip() else "a document:"
    )
    task = (
        f"Combine these part summaries into one summary of the whole {template.label}, "
        f"in a few short paragraphs. Cover: {_topics(template)}. "
        "Keep the page citations [p. N]. Do not add facts that are not in the summaries."
    )
    return _messages(header + "\n\n" + "\n\n".join(lines) + TASK_SEPARATOR + task)


def question_messages(block: str, question: str) -> list[dict[str, str]]:
    """Answer one question; the question comes last, so all before it is a shared prefix."""
    task = (
        "Answer the question below using only the document above, and cite the pages you used "
        "as [p. N]. If the document does not say, answer that it does not say.\n"
        f"Question: {question.strip()}"
    )
    return _messages(block + TASK_SEPARATOR + task)
