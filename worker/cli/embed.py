"""`longdoc embed`: give stored documents' passages their vectors ahead of their first question.

Answer and summary jobs embed a document's passages on first use anyway; this does it for the
whole library (`--missing`) or for given documents, in this process, and can be run again: a
document whose passages all hold vectors of the configured model is skipped.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from app.db.session import make_engine, session_factory
from app.embedding_models import MODELS, NO_EMBEDDING_MODEL, EmbedderUnavailableError
from app.errors import AppError
from app.services import access, documents
from worker.cli import as_user
from worker.cli.common import console, exit_on_error, load_settings, open_session
from worker.model.vector_store import ensure_vectors

commands = typer.Typer()


class _EmbeddingsOff(AppError):
    code = "embeddings_unavailable"


@commands.command()
def embed(
    document_ids: Annotated[
        list[int] | None, typer.Argument(help="Document ids (default: see --missing).")
    ] = None,
    missing: Annotated[
        bool, typer.Option("--missing", help="Every document whose passages lack vectors.")
    ] = False,
) -> None:
    """Compute and store passage vectors for hybrid retrieval (BM25 + sentence embeddings)."""
    with exit_on_error():
        if not document_ids and not missing:
            raise typer.BadParameter("give document ids or --missing", param_hint="DOCUMENT_IDS")
        settings = load_settings()
        if settings.embedding_model == NO_EMBEDDING_MODEL:
            raise _EmbeddingsOff("Embeddings are off (LONGDOC_EMBEDDING_MODEL=none).")
        with open_session(settings) as session:
            targets = list(document_ids or [])
            for document_id in targets:
                # Accounts (issue 25): documents the acting user (`--as`) may read, as a
                # question would embed them; a missing one and a refused one read alike.
                as_user.require_document(session, document_id, action="embed")
            session.commit()  # the audit rows
            if missing:
                lacking = documents.documents_missing_embeddings(
                    session=session, model=_model_name(settings.embedding_model)
                )
                readable = access.readable_document_ids(
                    session=session, actor=as_user.actor(session)
                )
                if readable is not None:
                    lacking = [i for i in lacking if i in readable]
                targets = sorted(set(targets) | set(lacking))
        if not targets:
            console.print("Every document's passages have vectors already; nothing to do.")
            return
        try:
            from worker.model.embedder import load_embedder  # torch: only when it embeds

            embedder = load_embedder(settings.embedding_model)
        except EmbedderUnavailableError as error:
            raise _EmbeddingsOff(error.message) from None
        engine = make_engine(settings.database_url)
        sessions = session_factory(engine)
        num_passages = 0
        try:
            with Progress(
                TextColumn("[bold]Embedding"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[stage]}"),
                console=console,
            ) as progress:
                task = progress.add_task("embed", total=len(targets), stage="")
                for document_id in targets:
                    progress.update(task, stage=f"document {document_id}")
                    vectors = ensure_vectors(sessions, document_id, embedder)
                    num_passages += 0 if vectors is None else vectors.num_passages
                    progress.advance(task)
                progress.update(task, stage="done")
        finally:
            engine.dispose()
        console.print(
            f"{len(targets)} document(s), {num_passages} passages with vectors of {embedder.name}."
        )


def _model_name(setting: str) -> str:
    """The name stored with the vectors of the model a setting names (without loading it)."""
    spec = MODELS.get(setting)
    if spec is None:
        raise _EmbeddingsOff(
            f"Unknown embedding model {setting!r}: LONGDOC_EMBEDDING_MODEL must be one of "
            f"{', '.join([*MODELS, NO_EMBEDDING_MODEL])}."
        )
    return spec.name
