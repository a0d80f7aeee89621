"""The `longdoc` command: the app's commands plus those that run the pipelines (ingest).

It lives in `worker` because ingesting needs `pipelines` and the model's tokenizer, which `app`
may not import; the commands that only read the database stay in app/cli.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.cli import cli, console, exit_on_error, load_settings, open_session
from app.db.session import make_engine, session_factory
from app.errors import AppError
from pipelines.parse import ParseLimits
from worker.ingest import KINDS, PRESENT, REFUSED, STORED, IngestOptions, ingest_file, pdf_paths
from worker.model_source import ModelNotFoundError, resolve_model_path
from worker.tokens import token_counter_for


class _ModelUnavailable(AppError):
    code = "model_unavailable"


@cli.command()
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="PDF files or folders (searched recursively).")
    ],
    password: Annotated[
        str | None, typer.Option(help="Password for encrypted PDFs (tried after the empty one).")
    ] = None,
    kind: Annotated[
        str, typer.Option(help="legal, medical, other, or auto (guessed from the text).")
    ] = "auto",
) -> None:
    """Store PDFs with their pages and passages; files already stored are not parsed again."""
    with exit_on_error():
        if kind not in KINDS:
            raise typer.BadParameter(f"choose one of {', '.join(KINDS)}", param_hint="--kind")
        settings = load_settings()
        with open_session(settings):
            pass  # fails early, with a sentence, when the database is missing or not migrated
        missing = [p for p in paths if not p.exists()]
        files = list(pdf_paths(p for p in paths if p.exists()))
        try:
            model_path = resolve_model_path(settings.model)
            count_tokens = token_counter_for(model_path, settings.model_cache_dir)
        except ModelNotFoundError as error:
            raise _ModelUnavailable(error.message) from None
        options = IngestOptions(
            files_dir=settings.files_dir,
            limits=ParseLimits(
                max_bytes=settings.max_upload_bytes,
                max_pages=settings.max_pages,
                timeout_s=settings.parse_timeout_s,
                max_memory_mb=settings.parse_memory_mb,
            ),
            passage_max_tokens=settings.passage_max_tokens,
            password=password,
            kind=kind,
        )
        engine = make_engine(settings.database_url)
        sessions = session_factory(engine)
        outcomes = []
        try:
            with Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[stage]}"),
                console=console,
                transient=False,
            ) as progress:
                task = progress.add_task("Ingesting", total=len(files), stage="")
                for path in files:

                    def on_stage(stage: str, name: str = path.name) -> None:
                        progress.update(task, stage=f"{escape(name)}: {stage}")

                    outcomes.append(
                        ingest_file(
                            path,
                            sessions=sessions,
                            options=options,
                            count_tokens=count_tokens,
                            on_stage=on_stage,
                        )
                    )
                    progress.advance(task)
                progress.update(task, stage="done")
        finally:
            engine.dispose()
        _print_outcomes(outcomes, missing)
        if not files and missing:
            raise typer.Exit(1)


def _print_outcomes(outcomes: list, missing: list[Path]) -> None:
    table = Table(title="Ingestion")
    for column in ("file", "result", "document", "pages", "passages", "why"):
        table.add_column(column)
    label = {
        STORED: "[green]stored[/green]",
        PRESENT: "already present",
        REFUSED: "[red]refused[/red]",
    }
    for outcome in outcomes:
        table.add_row(
            escape(outcome.path.name),
            label[outcome.status],
            str(outcome.document_id or ""),
            str(outcome.num_pages or ""),
            str(outcome.num_passages or ""),
            escape(outcome.reason or ""),
        )
    for path in missing:
        table.add_row(escape(str(path)), label[REFUSED], "", "", "", "No such file or folder.")
    console.print(table)
    counts = {
        status: sum(o.status == status for o in outcomes) for status in (STORED, PRESENT, REFUSED)
    }
    console.print(
        f"{counts[STORED]} stored, {counts[PRESENT]} already present, "
        f"{counts[REFUSED] + len(missing)} refused."
    )


def main() -> None:
    cli()


# Registered on `cli` by importing them: queueing and following jobs, and the services.
from worker import cli_jobs, cli_services  # noqa: E402, F401
