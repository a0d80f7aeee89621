"""How `longdoc ask` and `longdoc summarize` print their results: the answer with its support
label and its quotes with pages; the key passages and the summary's lead from the key facts,
with pages, before the model's summary, whose sentences each carry the page of the passage they
rest on, those without one set apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from app.db.models import Answer, Summary
from app.display import display_name, terminal_text
from app.services.answer_labels import MODEL_TEXT_TITLE, AnswerView, view_of
from app.services.summary_sentences import (
    NONE_SUPPORTED,
    nothing_stated,
    quoted_instead,
    sentence_views,
    support_line,
    was_checked,
)


def _flat(text: str) -> str:
    return " ".join(terminal_text(text).split())


def _quotes(console: Console, quotes: Sequence[Mapping[str, Any]]) -> None:
    for quote in quotes:
        where = f"p. {quote['page']}:"
        if quote.get("title"):  # a collection's quote names its document
            where = f"[{display_name(quote['title'])}, p. {quote['page']}]"
        console.out(f'  {where} "{_flat(quote["text"])}"', highlight=False)


def print_view(
    console: Console, view: AnswerView, *, quotes_title: str = "Quoted from the document:"
) -> None:
    """An answer as app.services.answer_labels.answer_view shows it everywhere: the text shown,
    its label and note, its quotes with pages, and the model's own text set apart."""
    console.out(terminal_text(view.text), highlight=False)
    if view.label is not None:
        console.print(f"\n[bold]{escape(view.label)}.[/bold] {escape(view.note)}")
    if view.quotes:
        console.print(quotes_title)
        _quotes(console, view.quotes)
    if view.model_text:
        console.print(f"{escape(MODEL_TEXT_TITLE)}:")
        console.out(f"  {_flat(view.model_text)}", highlight=False)


def print_answer(console: Console, answer: Answer) -> None:
    print_view(console, view_of(answer))
    pages = ", ".join(str(p) for p in answer.cited_pages) or "none"
    console.print(f"Cited pages: {pages}")


def print_summary(console: Console, summary: Summary) -> None:
    if summary.key_passages:
        console.print("[bold]Key passages[/bold] (quoted from the document):")
        _quotes(console, summary.key_passages)
    lead = sentence_views(summary.lead or [])
    if lead:
        console.print("\n[bold]Key facts[/bold] (each quoted from the document):")
        for view in lead:
            console.out(f"  {_flat(view.text)} [p. {view.page}]", highlight=False)
    if summary.key_passages or lead:
        console.print("\n[bold]Summary by the model[/bold]:")
    views = sentence_views(summary.sentence_support or [])
    instead = quoted_instead(has_lead=bool(lead), has_key_passages=bool(summary.key_passages))
    if not views:
        if was_checked(summary.stats):
            text = f"{nothing_stated(summary.stats)} {instead}".strip()
        else:
            text = summary.text
        console.out(terminal_text(text), highlight=False)
        return
    supported = [view for view in views if view.is_supported]
    apart = [view for view in views if not view.is_supported]
    if supported:
        text = " ".join(f"{_flat(view.text)} [p. {view.page}]" for view in supported)
        console.out(text, highlight=False)
    else:
        console.out(f"{NONE_SUPPORTED} {instead}".strip(), highlight=False)
    console.print(escape(support_line(views)), style="dim")
    if apart:
        console.print("[bold]Set apart[/bold] (not supported by the document):")
        for view in apart:
            console.out(f"  - {_flat(view.text)} ({view.note})", highlight=False)
