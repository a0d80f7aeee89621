"""`longdoc summarize`, `longdoc ask` and `longdoc jobs`: queue work by task name and follow it.

Jobs are created and queued as the UI does (app.services.dispatch.submit_job): the row is committed
before its task is sent, so a worker that picks the task up at once finds it, and a broker that
is down fails the job with a sentence. Waiting polls the row (stage, done of total) and shows it
live; Ctrl-C stops only the waiting, never the job.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy.orm import Session

from app.db.models import Job, JobKind, JobStatus
from app.display import display_name
from app.errors import AppError, NotFound
from app.services import (
    acting,
    collection_answers,
    collections,
    dispatch,
    file_store,
    jobs,
    questions,
    results,
)
from app.services.answer_labels import answer_record, collection_answer_record
from app.settings import Settings
from worker.cli import as_user
from worker.cli.collections import PICK_HELP, collection_or_fail, print_collection_answer
from worker.cli.common import console, error_console, exit_on_error, load_settings, open_session
from worker.cli.output import print_answer, print_summary

commands = typer.Typer()

POLL_INTERVAL_S = 0.5


class JobFailed(AppError):
    code = "job_failed"


def submit(settings: Settings, session: Session, kind: JobKind, **values: Any) -> int:
    """Create and queue the job the way every client does (app.services.dispatch.submit_job):
    committed, then sent by name; its id. A broker that cannot be reached fails the job with a
    sentence, and the command says so and exits 1."""
    try:
        job = dispatch.submit_job(settings=settings, session=session, kind=kind, **values)
    except dispatch.BrokerUnavailable as error:
        raise dispatch.BrokerUnavailable(f"Job {error.job_id} failed: {error}") from None
    return job.id


def document_or_fail(
    session: Session, document_id: int, *, action: str = "view", write: bool = False
) -> None:
    # Accounts (issue 25): exists, and the acting user (`--as`) may do this to it (logged).
    as_user.require_document(session, document_id, action=action, write=write)


@commands.command()
def summarize(
    target: Annotated[
        str, typer.Argument(help="A PDF file to ingest and summarize, or a document id.")
    ],
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Follow the job, or queue it and return.")
    ] = True,
) -> None:
    """Summarize a stored document, or ingest a PDF first and then summarize it."""
    with exit_on_error():
        settings = load_settings()
        with open_session(settings) as session:
            if target.isdigit() and not Path(target).exists():
                document_or_fail(session, int(target), action="summarize", write=True)
                job_id = submit(settings, session, JobKind.SUMMARIZE, document_id=int(target))
            else:
                owner = acting.allow_upload(
                    session=session, actor=as_user.actor(session), collection_id=None
                )
                params = _ingest_params(settings, Path(target), then_summarize=True, owner_id=owner)
                job_id = submit(settings, session, JobKind.INGEST, params=params.to_dict())
        console.print(f"Queued job {job_id}.")
        if not wait:
            return
        final = wait_for(settings, job_id)
        if final.kind == JobKind.INGEST:
            follow_up = final.stats.get("follow_up_job_id")
            if follow_up is None:
                raise JobFailed("The file was ingested but no summary job was created.")
            console.print(f"Stored as document {final.document_id}; summarizing (job {follow_up}).")
            final = wait_for(settings, int(follow_up))
        with open_session(settings) as session:
            summary = results.get_summary_for_job(session=session, job_id=final.id)
            console.rule(f"Summary of document {final.document_id} ({summary.method.value})")
            print_summary(console, summary)


def _ingest_params(
    settings: Settings, path: Path, *, then_summarize: bool, owner_id: int | None = None
) -> jobs.IngestParams:
    if not path.is_file():
        raise NotFound(f"There is no file {path} (give a PDF file or a document id).")
    # Into the document store first: the worker that ingests it may run elsewhere.
    content_hash = file_store.content_hash_of(path)
    stored = file_store.store_file(
        files_dir=settings.files_dir, content_hash=content_hash, data=path
    )
    file_name = display_name(path.name)
    return jobs.IngestParams(
        file_name=file_name, path=str(stored), then_summarize=then_summarize, owner_id=owner_id
    )


@commands.command()
def ask(
    first: Annotated[
        str,
        typer.Argument(
            metavar="[DOCUMENT_ID] QUESTION",
            help="The document's id, then the question in quotes; with --collection, the "
            "question alone.",
        ),
    ],
    second: Annotated[str | None, typer.Argument(hidden=True)] = None,
    collection: Annotated[
        str | None, typer.Option(help=f"Ask this collection instead of one document. {PICK_HELP}")
    ] = None,
    each: Annotated[
        bool | None,
        typer.Option(
            "--each/--retrieve",
            help="With --collection: answer for every document in a table, or from the best "
            "passages across them (default: the question decides).",
        ),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Follow the job, or queue it and return.")
    ] = True,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the answer as JSON (its support state, label and note, quotes, the "
            "model's text set apart); progress goes to stderr.",
        ),
    ] = False,
) -> None:
    """Ask a question about a document (or a collection); the answer cites its pages and
    quotes its evidence."""
    with exit_on_error():
        if as_json and not wait:
            raise typer.BadParameter("--json needs --wait: there is no answer to print yet")
        if collection is not None:
            if second is not None:
                raise typer.BadParameter(
                    "with --collection give only the question", param_hint="QUESTION"
                )
            _ask_collection(collection, first, each=each, wait=wait, as_json=as_json)
            return
        if second is None or not first.isdigit():
            raise typer.BadParameter(
                "give a document id and a question (or --collection NAME)", param_hint="QUESTION"
            )
        document_id = int(first)
        settings = load_settings()
        # Checked before the database is opened: empty once read as it looks, or too long.
        question = questions.typed_question(second, max_chars=settings.max_question_chars)
        with open_session(settings) as session:
            acting.allow_ask(
                session=session,
                actor=as_user.actor(session),
                document_id=document_id,
                question=question,
            )
            params = {"question": question}  # checked above (typed_question)
            job_id = submit(
                settings, session, JobKind.ANSWER, document_id=document_id, params=params
            )
        _show_when_done(
            settings,
            job_id,
            wait=wait,
            as_json=as_json,
            read=lambda session: results.get_answer_for_job(session=session, job_id=job_id),
            record=answer_record,
            title=f"Answer about document {document_id}",
            show=print_answer,
        )


def _ask_collection(
    name: str, question: str, *, each: bool | None, wait: bool, as_json: bool
) -> None:
    settings = load_settings()
    question = questions.typed_question(question, max_chars=settings.max_question_chars)
    with open_session(settings) as session:
        collection = collection_or_fail(session, name, action="ask")
        acting.allow_collection_question(
            session=session,
            actor=as_user.actor(session),
            collection_id=collection.id,
            question=question,
        )
        if not collections.document_ids_of(session=session, collection_id=collection.id):
            raise NotFound(f"The collection {collection.name!r} holds no document yet.")
        params = collection_answers.question_params(
            collection_id=collection.id,
            question=question,
            each=each,
            max_chars=settings.max_question_chars,
        )
        collection_id, collection_name = collection.id, collection.name
        job_id = submit(
            settings, session, JobKind.ANSWER, collection_id=collection_id, params=params
        )
    _show_when_done(
        settings,
        job_id,
        wait=wait,
        as_json=as_json,
        read=lambda session: collection_answers.get_for_job(session=session, job_id=job_id),
        record=collection_answer_record,
        title=f"Answer across {escape(collection_name)!r}",
        show=print_collection_answer,
    )


def _show_when_done(
    settings: Settings,
    job_id: int,
    *,
    wait: bool,
    as_json: bool,
    read: Callable[[Session], Any],
    record: Callable[[Any], dict[str, Any]],
    title: str,
    show: Callable[[Console, Any], None],
) -> None:
    """Say the job is queued; with `wait`, follow it to its end, then print what `read` finds
    (as JSON through `record`, else under `title` through `show`). Progress and the queued line
    go to stderr with --json, so stdout holds the JSON alone."""
    status = error_console if as_json else console
    status.print(f"Queued job {job_id}.")
    if not wait:
        return
    wait_for(settings, job_id, shown_on=status)
    with open_session(settings) as session:
        found = read(session)
        if as_json:
            console.out(json.dumps(record(found), ensure_ascii=False, indent=2))
            return
        console.rule(title)
        show(console, found)


def wait_for(settings: Settings, job_id: int, *, shown_on: Console = console) -> Job:
    """Poll the job until it ends, its progress shown on `shown_on`; raise JobFailed with its
    sentence when it failed."""
    columns = (
        TextColumn("[bold]Job {task.fields[job_id]}[/bold] {task.fields[stage]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=shown_on, transient=True) as progress:
            bar = progress.add_task("job", total=None, job_id=job_id, stage="queued")

            def show(job: Job) -> None:
                total = job.progress_total or None
                progress.update(
                    bar, total=total, completed=job.progress_done, stage=job.stage or job.status
                )

            job = jobs.wait_for_job(
                open_session=lambda: open_session(settings),
                job_id=job_id,
                on_update=show,
                interval_s=POLL_INTERVAL_S,
            )
            if job is None:
                raise NotFound(f"Job {job_id} is gone (its document was deleted).")
    except KeyboardInterrupt:
        error_console.print(
            f"Stopped waiting; job {job_id} goes on. Follow it with `longdoc jobs`."
        )
        raise typer.Exit(130) from None
    if job.status == JobStatus.FAILED:
        raise JobFailed(f"Job {job_id} failed: {job.error}")
    return job


@commands.command("jobs")
def jobs_command(
    status: Annotated[JobStatus | None, typer.Option(help="Only this status.")] = None,
    kind: Annotated[JobKind | None, typer.Option(help="Only this kind.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 30,
) -> None:
    """List background jobs with their progress and errors, newest first."""
    with exit_on_error(), open_session(load_settings()) as session:
        rows = jobs.list_jobs(session=session, status=status, kind=kind, limit=limit)
        rows = acting.visible_jobs(session=session, actor=as_user.actor(session), rows=rows)
        if not rows:
            console.print("No jobs yet.")
            return
        table = Table("ID", "Kind", "Status", "Stage", "Progress", "Document", "Created", "Error")
        for job in rows:
            progress = f"{job.progress_done}/{job.progress_total}" if job.progress_total else ""
            table.add_row(
                str(job.id),
                job.kind.value,
                job.status.value,
                escape(display_name(job.stage or "")),
                progress,
                str(job.document_id or ""),
                job.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                escape(display_name(job.error or "")),
            )
        console.print(table)
