"""How `longdoc ask` and `longdoc summarize` print their results: the answer with its support
label and its quotes with pages; the key passages and the summary's lead from the key facts,
with pages, before the model's summary, whose sentences each carry the page of the passage they
rest on, those without one set apart."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from app.db.models import Answer, Summary
from app.display import terminal_text
from app.services.answer_labels import support_label, support_note
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


def _quotes(console: Console, quotes: list[dict]) -> None:
    for quote in quotes:
        console.out(f'  p. {quote["page"]}: "{_flat(quote["text"])}"', highlight=False)


def print_answer(console: Console, answer: Answer) -> None:
    console.out(terminal_text(answer.answer), highlight=False)
    label = support_label(answer.support)
    if label is not None:
        note = support_note(
            answer.support,
            answer.unsupported_claims or [],
            answer.stats,
            model_answer=answer.model_answer,
        )
        console.print(f"\n[bold]{escape(label)}.[/bold] {escape(note)}")
    if answer.quotes:
        console.print("Quoted from the document:")
        _quotes(console, answer.quotes)
    if answer.model_answer:
        console.print("The model's own answer, not shown above:")
        console.out(f"  {_flat(answer.model_answer)}", highlight=False)
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
