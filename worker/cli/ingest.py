"""`longdoc ingest PATH...`: store PDFs with their pages and passages in this process (the
parse child, the splitter and the model's tokenizer), each file's outcome in a table."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy.orm import Session, sessionmaker

from app.db.retry import with_lock_retries
from app.db.session import make_engine, session_factory
from app.display import display_name
from app.errors import AppError
from app.services import acting, collection_names, collections, dispatch, jobs
from app.services.access import Actor
from app.settings import Settings
from worker.cli import as_user
from worker.cli.common import console, exit_on_error, load_settings, open_session
from worker.ingest.store import KINDS, PRESENT, REFUSED, STORED, IngestOptions, pdf_paths
from worker.jobs.ingest import IngestOutcome, ingest_file
from worker.jobs.recovery import fail_jobs_of_dead_processes
from worker.model.embedder import SharedEmbedder
from worker.model.source import ModelNotFoundError, resolve_model_path
from worker.model.tokens import token_counter_for

logger = logging.getLogger(__name__)

commands = typer.Typer()


class _ModelUnavailable(AppError):
    code = "model_unavailable"


@commands.command()
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
    collection: Annotated[
        str | None,
        typer.Option(help="Also put the files into this collection (created if new)."),
    ] = None,
) -> None:
    """Store PDFs with their pages and passages; files already stored are not parsed again.

    Exit status 1 when no file ends up in the library (every one refused or missing), so a
    script can tell; 0 when at least one was stored or was already there.
    """
    with exit_on_error():
        if kind not in KINDS:
            raise typer.BadParameter(f"choose one of {', '.join(KINDS)}", param_hint="--kind")
        settings = load_settings()
        with open_session(settings) as session:
            # Fails early, with a sentence, when the database is missing or not migrated, or
            # when the acting user (`--as`) may not store documents (into that collection).
            actor = as_user.actor(session)
            collection_id = _collection_to_fill(session, actor, collection)
            # Read only (a refusal is logged and committed by the check): the upload itself is
            # logged once something is stored, so a busy database refuses files, not the batch.
            owner_id = acting.allow_upload(
                session=session, actor=actor, collection_id=collection_id, record=False
            )
        missing = [p for p in paths if not p.exists()]
        files = list(pdf_paths(p for p in paths if p.exists()))
        try:
            model_path = resolve_model_path(settings.model)
            count_tokens = token_counter_for(model_path, settings.model_cache_dir)
        except ModelNotFoundError as error:
            raise _ModelUnavailable(error.message) from None
        options = IngestOptions.from_settings(settings).for_file(kind=kind, password=password)
        embedder = SharedEmbedder().get(settings.embedding_model) if files else None
        engine = make_engine(settings.database_url)
        sessions = session_factory(engine)
        with contextlib.suppress(Exception):  # housekeeping: never a reason not to ingest
            fail_jobs_of_dead_processes(sessions=sessions)  # an earlier ingest that was killed
        outcomes = []
        facts = _FactsQueue(settings, sessions)
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

                    def on_stage(stage: str, name: str = display_name(path.name)) -> None:
                        progress.update(task, stage=f"{escape(name)}: {stage}")

                    outcome = ingest_file(
                        path,
                        sessions=sessions,
                        options=options,
                        count_tokens=count_tokens,
                        on_stage=on_stage,
                        embedder=embedder,
                        owner_id=owner_id,
                    )
                    outcomes.append(outcome)
                    facts.send(outcome)
                    progress.advance(task)
                progress.update(task, stage="done")
        finally:
            engine.dispose()
        _print_outcomes(outcomes, missing)
        _print_facts_queued(outcomes, facts)
        _claim(settings, owner_id, outcomes)
        _log_upload(settings, collection_id, outcomes)
        if collection is not None:
            _into_collection(settings, collection, collection_id, outcomes)
        if not any(outcome.status in (STORED, PRESENT) for outcome in outcomes):
            raise typer.Exit(1)


class _FactsQueue:
    """Sends the key-facts job created with each newly stored document (worker/jobs/ingest.py) to
    the workers with app.services.dispatch.queue_jobs, as the ingest task sends its follow-ups. A
    broker that cannot be reached fails the job with its sentence; it is then not asked again in
    this batch (each try waits seconds): the next files' facts jobs are failed with the same
    sentence at once (dispatch.fail_not_queued)."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session]) -> None:
        self.settings, self.sessions = settings, sessions
        self.num_queued = 0
        self.broker_down: str | None = None

    def send(self, outcome: IngestOutcome) -> None:
        job_id = outcome.facts_job_id
        if job_id is None:
            return
        try:
            with self.sessions() as session:
                if self.broker_down is not None:
                    job = jobs.get_job(session=session, job_id=job_id)
                    if job is not None:
                        dispatch.fail_not_queued(
                            session=session, job=job, sentence=self.broker_down
                        )
                    return
                if dispatch.queue_jobs(settings=self.settings, session=session, job_ids=[job_id]):
                    self.num_queued += 1
                    return
                job = jobs.get_job(session=session, job_id=job_id)
                if job is not None and job.error_code == dispatch.BrokerUnavailable.code:
                    self.broker_down = job.error
        except Exception as error:  # the database is busy or gone: the document is stored anyway
            logger.warning("key-facts job %s not queued: %s", job_id, type(error).__name__)


def _print_facts_queued(outcomes: list[IngestOutcome], facts: _FactsQueue) -> None:
    num_created = sum(o.facts_job_id is not None for o in outcomes)
    if facts.num_queued:
        console.print(
            f"Key facts queued for {facts.num_queued} document(s); the worker extracts them "
            "(`longdoc up` runs it; see them with `longdoc facts ID`)."
        )
    if num_created > facts.num_queued:
        console.print(
            f"[yellow]Key facts were not queued for {num_created - facts.num_queued} "
            f"document(s). {escape(facts.broker_down or '')} Once it runs, "
            "`longdoc facts ID --run` extracts a document's key facts.[/yellow]"
        )


def _claim(settings: Settings, owner_id: int | None, outcomes: list) -> None:
    """Newly stored documents belong to the acting user (`--as`); the local admin's to no one."""
    ids = [o.document_id for o in outcomes if o.status == STORED and o.document_id]
    if owner_id is not None and ids:
        with open_session(settings) as session:
            acting.claim_documents(session=session, owner_id=owner_id, document_ids=ids)
            session.commit()


def _log_upload(settings: Settings, collection_id: int | None, outcomes: list) -> None:
    """The upload in the audit log, with the documents stored (none stored: nothing uploaded)."""
    ids = [o.document_id for o in outcomes if o.status == STORED and o.document_id]
    if not ids:
        return

    def write() -> None:
        with open_session(settings) as session:
            acting.record_upload(
                session=session,
                actor=as_user.actor(session),
                collection_id=collection_id,
                document_ids=ids,
            )
            session.commit()

    with_lock_retries(write, what="logging the upload")


def _collection_to_fill(session: Session, actor: Actor, text: str | None) -> int | None:
    """The id of the collection `--collection` picks among those `actor` may read; None when
    none is given, or when none they may read has the name (the batch then creates theirs, as
    it would had nobody's collection that name). "#ID" must pick one they may read; a name
    that cannot be a collection's is refused before any file is read."""
    if text is None:
        return None
    if collection_names.by_id(text) is not None:
        return acting.find_collection(session=session, actor=actor, name=text, action="upload").id
    found = acting.lookup_collection(session=session, actor=actor, name=text)
    if found is None:
        collection_names.checked_name(text)
    return None if found is None else found.id


def _into_collection(settings, name: str, collection_id: int | None, outcomes: list) -> None:
    """The stored and already present files' documents into the collection found before the
    batch (`collection_id`), or the one named `name` (created if the acting user may read none
    of that name)."""
    ids = [o.document_id for o in outcomes if o.status in (STORED, PRESENT) and o.document_id]
    with open_session(settings) as session:
        actor = as_user.actor(session)
        found = (
            collections.get_collection(session=session, collection_id=collection_id)
            if collection_id is not None
            else acting.lookup_collection(session=session, actor=actor, name=name)
        )
        created = found is None
        target = found or acting.create_collection(session=session, actor=actor, name=name)
        count = collections.add_documents(
            session=session, collection_id=target.id, document_ids=ids
        )
        session.commit()
        console.print(
            f"Added {count} document(s) to {'the new collection' if created else 'collection'} "
            f"{escape(target.name)!r}."
        )


def _print_outcomes(outcomes: list[IngestOutcome], missing: list[Path]) -> None:
    table = Table(title="Ingestion")
    # Shown when a file has them (the table stays narrow otherwise): "OCR", pages read by OCR;
    # "hidden", boxes that hide readable text (bad redactions).
    has_ocr = any(o.num_ocr_pages for o in outcomes)
    has_hidden = any(o.num_redactions for o in outcomes)
    columns = ["file", "result", "document", "pages"]
    columns += ["OCR"] * has_ocr + ["hidden"] * has_hidden + ["passages", "why"]
    for column in columns:
        table.add_column(column)
    label = {
        STORED: "[green]stored[/green]",
        PRESENT: "already present",
        REFUSED: "[red]refused[/red]",
    }
    for outcome in outcomes:
        is_stored = outcome.status == STORED
        table.add_row(
            escape(display_name(outcome.path.name)),
            label[outcome.status],
            str(outcome.document_id or ""),
            str(outcome.num_pages or ""),
            *[str(outcome.num_ocr_pages) if is_stored else ""] * has_ocr,
            *[_redactions_cell(outcome)] * has_hidden,
            str(outcome.num_passages or ""),
            escape(outcome.reason or outcome.notice or ""),
        )
    for path in missing:
        table.add_row(
            escape(display_name(str(path))),
            label[REFUSED],
            *[""] * (len(columns) - 3),
            "No such file or folder.",
        )
    console.print(table)
    counts = {
        status: sum(o.status == status for o in outcomes) for status in (STORED, PRESENT, REFUSED)
    }
    console.print(
        f"{counts[STORED]} stored, {counts[PRESENT]} already present, "
        f"{counts[REFUSED] + len(missing)} refused."
    )
    num_ocr_pages = sum(o.num_ocr_pages for o in outcomes)
    num_redacted = sum(1 for o in outcomes if o.num_redactions)
    if num_ocr_pages or num_redacted:
        console.print(
            f"{num_ocr_pages} page{'' if num_ocr_pages == 1 else 's'} read by OCR; "
            f"{num_redacted} document{'' if num_redacted == 1 else 's'} with boxes that hide "
            "readable text."
        )


def _redactions_cell(outcome: IngestOutcome) -> str:
    if outcome.status != STORED:
        return ""
    if not outcome.num_redactions:
        return "0"
    return f"[bold yellow]{outcome.num_redactions}[/bold yellow]"
