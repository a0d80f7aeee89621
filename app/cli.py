"""The app's command line: `longdoc db upgrade|current`, `longdoc docs`, `longdoc show ID`.

worker/cli.py imports `cli` and adds the commands that need the engine (`ingest`); it can reuse
`exit_on_error`, `load_settings` (app/settings.py) and `open_session` so that every command fails
the same way: one sentence on stderr, exit status 1, no traceback. Only `show` prints document text.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from app.cli_sources import page_title, print_redactions, source_fields
from app.db.models import Document, DocumentKind, DocumentStatus
from app.db.session import (
    database_unavailable,
    display_url,
    make_engine,
    session_factory,
    sqlite_file,
)
from app.display import display_name, terminal_text
from app.errors import AppError, DatabaseNotMigrated, NotFound
from app.migrate import current_revision, head_revision, require_head, upgrade
from app.services import documents
from app.settings import Settings, load_settings

# Locals off: a traceback of an unexpected error must not print page text held in variables.
cli = typer.Typer(
    name="longdoc",
    help="Faithful summaries and cited answers for long legal and medical PDFs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
db_cli = typer.Typer(help="Create or inspect the database schema.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")

console = Console()
error_console = Console(stderr=True)


@contextmanager
def exit_on_error() -> Iterator[None]:
    """Turn an AppError into its sentence on stderr and exit status 1."""
    try:
        yield
    except AppError as error:
        error_console.print(f"[red]{escape(str(error))}[/red]", soft_wrap=True)
        raise typer.Exit(1) from None


@contextmanager
def open_session(settings: Settings) -> Iterator[Session]:
    """A session on a database that exists and is at the newest migration."""
    url = settings.database_url
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise DatabaseNotMigrated(
            f"There is no database at {path} yet; run `longdoc db upgrade` to create it."
        )
    engine = make_engine(url)
    try:
        require_head(engine)
        with session_factory(engine)() as session:
            yield session
    except (OperationalError, InterfaceError) as error:
        raise database_unavailable(url, error) from error
    finally:
        engine.dispose()


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Create the database, or bring its schema up to the newest migration."""
    with exit_on_error():
        settings = load_settings()
        upgrade(settings.database_url)
        where = display_url(settings.database_url)
        console.print(f"Database at {escape(where)} is at revision {head_revision()} (newest).")


@db_cli.command("current")
def db_current() -> None:
    """Show which migration the database is at."""
    with exit_on_error():
        settings = load_settings()
        url, head = settings.database_url, head_revision()
        where = escape(display_url(url))
        path = sqlite_file(url)
        if path is not None and not path.exists():
            console.print(f"No database at {where} yet; run `longdoc db upgrade`.")
            return
        engine = make_engine(url)
        try:
            revision = current_revision(engine)
        finally:
            engine.dispose()
        if revision == head:
            console.print(f"Database at {where} is at revision {revision} (newest).")
        elif revision is None:
            console.print(f"Database at {where} has no tables yet; run `longdoc db upgrade`.")
        else:
            console.print(
                f"Database at {where} is at revision {revision}; the newest is {head}. "
                "Run `longdoc db upgrade`."
            )


def _added(document: Document) -> str:
    return document.created_at.strftime("%Y-%m-%d %H:%M UTC")


@cli.command("docs")
def docs_command(
    kind: Annotated[DocumentKind | None, typer.Option(help="Only this kind.")] = None,
    status: Annotated[DocumentStatus | None, typer.Option(help="Only this status.")] = None,
    title: Annotated[
        str | None, typer.Option(help="Only titles or file names containing this.")
    ] = None,
) -> None:
    """List the stored documents, newest first."""
    with exit_on_error(), open_session(load_settings()) as session:
        rows = documents.list_documents(
            session=session, kind=kind, status=status, title_query=title
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


@cli.command("show")
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
        document = documents.get_document(session=session, document_id=document_id)
        if document is None:
            raise NotFound(f"There is no document with id {document_id}; see `longdoc docs`.")
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


def main() -> None:
    cli()
