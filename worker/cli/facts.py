"""`longdoc facts`: a document's key facts as a table (extracted again with --run), or the
whole library's exported to CSV or JSON (one row per document, one column per field).

Only the facts' values and their short quotes are printed: the user asked for this document's
facts on their own terminal. Nothing is logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from app.db.models import JobKind, JobStatus
from app.services import acting, jobs
from app.services import facts as fact_service
from worker.cli import as_user
from worker.cli.common import console, exit_on_error, load_settings, open_session
from worker.cli.jobs import document_or_fail, submit, wait_for

commands = typer.Typer()

MAX_QUOTE_CHARS = 160
_SOURCE_LABEL = {"model": "model", "rule": "rule", "none": "-"}


def _quote(evidence: list[dict]) -> str:
    if not evidence:
        return ""
    text = " ".join(str(evidence[0].get("text", "")).split())
    return text if len(text) <= MAX_QUOTE_CHARS else text[: MAX_QUOTE_CHARS - 1] + "…"


def _print_facts(document_id: int, rows: list) -> None:
    table = Table(title=f"Key facts of document {document_id}")
    for column in ("Field", "Value", "Page", "Confidence", "Source", "Quote"):
        table.add_column(column)
    for fact in rows:
        found = fact.source.value != "none"
        table.add_row(
            escape(fact.label),
            escape(fact.value) if found else "[dim]not found[/dim]",
            str(fact.page) if found and fact.page else "",
            f"{fact.confidence:.2f}" if found else "",
            _SOURCE_LABEL[fact.source.value],
            escape(_quote(fact.evidence)) if found else "",
        )
    console.print(table)
    num_found = sum(fact.source.value != "none" for fact in rows)
    console.print(f"{num_found} of {len(rows)} fields found; values marked rule were read by rule.")


@commands.command("facts")
def facts_command(
    document_id: Annotated[
        int | None, typer.Argument(help="The document's id (see `longdoc docs`).")
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(help="Write the whole library's key facts to this .csv or .json file."),
    ] = None,
    run: Annotated[
        bool, typer.Option("--run", help="Extract the document's key facts again first.")
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="With --run: follow the job, or return.")
    ] = True,
) -> None:
    """Show a document's key facts with their quotes and pages, or export the library's."""
    with exit_on_error():
        if (document_id is None) == (export is None):
            raise typer.BadParameter("give a document id or --export FILE (not both)")
        settings = load_settings()
        if export is not None:
            with open_session(settings) as session:
                count = acting.export_facts(
                    session=session, actor=as_user.actor(session), path=export
                )
            console.print(f"Wrote the key facts of {count} document(s) to {escape(str(export))}.")
            return
        with open_session(settings) as session:
            document_or_fail(
                session, document_id, action="facts_run" if run else "facts", write=run
            )
            session.commit()  # the audit row
            if run:
                job_id = submit(settings, session, JobKind.FACTS, document_id=document_id)
        if run:
            console.print(f"Queued job {job_id}.")
            if not wait:
                return
            wait_for(settings, job_id)
        with open_session(settings) as session:
            rows = fact_service.list_facts(session=session, document_id=document_id)
            if rows:
                _print_facts(document_id, rows)
                return
            done = jobs.list_jobs(
                session=session,
                kind=JobKind.FACTS,
                document_id=document_id,
                status=JobStatus.SUCCEEDED,
                limit=1,
            )
        if done:
            console.print(f"Document {document_id} is of a kind with no key-fact schema.")
        else:
            console.print(
                f"No key facts for document {document_id} yet; "
                f"extract them with `longdoc facts {document_id} --run`."
            )
