"""`longdoc docs`, `longdoc show ID` and `longdoc delete ID`: the stored documents, one of them
with its pages and passages, and deleting one. Only `show` prints document text: the user
asked for it."""

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from app.db.models import Document, DocumentKind, DocumentStatus
from app.db.session import write_transaction
from app.display import display_name, terminal_text
from app.errors import NotFound
from app.services import acting, dispatch, documents
from worker.cli import as_user
from worker.cli.common import (
    console,
    error_console,
    exit_on_error,
    load_settings,
    open_session,
)
from worker.cli.sources import page_title, print_redactions, source_fields

commands = typer.Typer()


def _added(document: Document) -> str:
    return document.created_at.strftime("%Y-%m-%d %H:%M UTC")


@commands.command("docs")
def docs_command(
    kind: Annotated[DocumentKind | None, typer.Option(help="Only this kind.")] = None,
    status: Annotated[DocumentStatus | None, typer.Option(help="Only this status.")] = None,
    title: Annotated[
        str | None, typer.Option(help="Only titles or file names containing this.")
    ] = None,
) -> None:
    """List the stored documents, newest first."""
    with exit_on_error(), open_session(load_settings()) as session:
        rows = acting.list_documents(
            session=session,
            actor=as_user.actor(session),
            kind=kind,
            status=status,
            title_query=title,
        )
        table = Table("ID", "Title", "Kind", "Pages", "Tokens", "Status", "Added")
        for document in rows:
            table.add_row(
                str(document.id),
                escape(display_name(document.title or document.file_name)),
                document.kind.value,
                str(document.num_pages),
                f"{document.num_tokens:,}",
                document.status.value,
                _added(document),
            )
        if not rows:
            is_filtered = kind is not None or status is not None or bool(title)
            console.print("No documents match." if is_filtered else "No documents yet.")
            return
        console.print(table)
        console.print(f"{len(rows)} document{'s' if len(rows) != 1 else ''}.")


def _print_header(document: Document, extra: Sequence[tuple[str, str]] = ()) -> None:
    header = Table.grid(padding=(0, 2))
    fields = [
        ("Document", str(document.id)),
        ("Title", display_name(document.title or "") or "(none)"),
        ("File", display_name(document.file_name)),
        ("Kind", document.kind.value),
        ("Status", document.status.value),
        ("Pages", str(document.num_pages)),
        ("Characters", f"{document.num_chars:,}"),
        ("Tokens", f"{document.num_tokens:,}"),
        ("Added", _added(document)),
        ("Content hash", document.content_hash),
    ]
    if document.error:
        fields.append(("Error", document.error))
    fields.extend(extra)
    for label, value in fields:
        header.add_row(f"[bold]{label}[/bold]", escape(value))
    console.print(header)


@commands.command("show")
def show_command(
    document_id: Annotated[int, typer.Argument(help="The document's id (see `longdoc docs`).")],
    pages: Annotated[bool, typer.Option("--pages/--no-pages", help="Print page text.")] = True,
    passages: Annotated[
        bool, typer.Option("--passages/--no-passages", help="Print passage text.")
    ] = True,
    page: Annotated[
        int | None, typer.Option(min=1, help="Only this page and the passages overlapping it.")
    ] = None,
    redactions: Annotated[
        bool,
        typer.Option(
            "--redactions",
            help="List the boxes that hide readable text (page, box, characters), not the text.",
        ),
    ] = False,
) -> None:
    """Print one document: its header, then its pages and passages (or, with --redactions, the
    boxes drawn over text that is still in the file)."""
    with exit_on_error(), open_session(load_settings()) as session:
        as_user.require_document(session, document_id, action="view")
        session.commit()  # the audit row
        document = documents.get_document(session=session, document_id=document_id)
        assert document is not None
        if page is not None and page > document.num_pages:
            raise NotFound(
                f"Document {document_id} has {document.num_pages} pages; there is no page {page}."
            )
        _print_header(document, source_fields(session=session, document=document))
        if redactions:
            print_redactions(console, session=session, document=document)
            return
        page_rows = (
            documents.get_pages(session=session, document_id=document_id, number=page)
            if pages
            else []
        )
        passage_rows = (
            documents.get_passages(session=session, document_id=document_id, page_number=page)
            if passages
            else []
        )
        for row in page_rows:
            console.rule(escape(page_title(row)))
            # out(): no markup, no emoji codes, no wrapping; the text is printed as stored.
            console.out(terminal_text(row.text), highlight=False)
        for passage in passage_rows:
            pages_label = (
                f"page {passage.first_page}"
                if passage.first_page == passage.last_page
                else f"pages {passage.first_page}-{passage.last_page}"
            )
            console.rule(f"Passage {passage.ordinal} · {pages_label} · {passage.num_tokens} tokens")
            console.out(terminal_text(passage.text), highlight=False)
        scope = "" if page is None else f" on page {page}"
        console.print(
            f"Document {document_id}: printed {len(page_rows)} page(s) and "
            f"{len(passage_rows)} passage(s){scope}."
        )


@commands.command("delete")
def delete_command(
    document_id: Annotated[int, typer.Argument(help="The document's id (see `longdoc docs`).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
) -> None:
    """Delete a document with its pages, passages, summaries, answers, key facts, jobs and stored
    file, as the web page's Delete does; its running jobs stop. Asks first, unless --yes."""
    missing = f"There is no document with id {document_id}; see `longdoc docs`."
    with exit_on_error():
        settings = load_settings()
        with open_session(settings) as session:
            as_user.require_document(session, document_id, action="view")
            session.commit()  # the audit row
            document = documents.get_document(session=session, document_id=document_id)
            if document is None:
                raise NotFound(missing)
            name = display_name(document.title or document.file_name)
        # Asked with no transaction open: a person may take their time to answer.
        if not yes and not typer.confirm(
            f"Delete document {document_id} ({name}) with its pages, passages, summaries, "
            "answers, key facts and stored file? This cannot be undone.",
            default=False,
        ):
            error_console.print("Nothing was deleted.")
            raise typer.Exit(1)
        with open_session(settings) as session:
            write_transaction(session)  # checked, then deleted: the write lock first (SQLite)
            as_user.require_document(session, document_id, action="delete", write=True)
            if not documents.delete_document(
                session=session,
                document_id=document_id,
                files_dir=settings.files_dir,
                kv_cache_dir=settings.kv_cache_dir,
                broker=dispatch.client_for(settings),
            ):
                raise NotFound(missing)
            session.commit()
        console.print(f"Deleted document {document_id} ({escape(name)}).")
