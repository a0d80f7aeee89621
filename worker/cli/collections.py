"""`longdoc collections ...` (create, rename, delete, add, remove, list, show) and
`longdoc search "QUERY"`: commands that need only the database. `search` prints snippets of passages, as `show` prints
pages: the user asked for them; nothing is logged."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.orm import Session

from app.db.models import Collection, CollectionAnswer, DocumentKind
from app.display import display_name, terminal_text
from app.errors import NotFound
from app.query_encoder import query_encoder
from app.services import acting, collections
from app.services.answer_labels import row_source, view_of
from app.services.search import SearchFilters, SearchHit
from worker.cli import as_user
from worker.cli.common import console, exit_on_error, load_settings, open_session
from worker.cli.output import print_view

commands = typer.Typer()

# Where a command takes a collection: names are unique per owner, so two collections one may
# read (an admin: every one) can share a name; "#ID" picks one of them.
PICK_HELP = "The collection: its name, or '#ID' (quoted) where several share the name."

collections_cli = typer.Typer(
    help="Named sets of documents (a matter, a case file, a set of papers).",
    no_args_is_help=True,
)
commands.add_typer(collections_cli, name="collections")


def collection_or_fail(session: Session, name: str, *, action: str) -> Collection:
    """The collection `name` picks among those the acting user (`--as`) may read: a name, or
    "#ID" where several they may read share the name (names are unique per owner; quote it in
    a shell). A missing one and one they may not read are refused in the same words, several
    of the name with their ids and owners (app.services.acting.find_collection)."""
    return acting.find_collection(
        session=session, actor=as_user.actor(session), name=name, action=action
    )


def _allow_write(session: Session, collection_id: int, action: str) -> None:
    acting.allow_collection_write(
        session=session, actor=as_user.actor(session), collection_id=collection_id, action=action
    )


@collections_cli.command("list")
def list_command() -> None:
    """List the collections with how many documents each holds."""
    with exit_on_error(), open_session(load_settings()) as session:
        rows = acting.list_collections(session=session, actor=as_user.actor(session))
        if not rows:
            console.print("No collections yet; create one with `longdoc collections create NAME`.")
            return
        table = Table("ID", "Name", "Owner", "Documents")
        for row in rows:
            owner = escape(row.owner_name) if row.owner_name else "(admins)"
            table.add_row(f"#{row.id}", escape(row.name), owner, str(row.num_documents))
        console.print(table)
        console.print(f"{len(rows)} collection{'s' if len(rows) != 1 else ''}.")


@collections_cli.command("create")
def create_command(name: Annotated[str, typer.Argument(help="The new collection's name.")]) -> None:
    """Create an empty collection."""
    with exit_on_error(), open_session(load_settings()) as session:
        collection = acting.create_collection(
            session=session, actor=as_user.actor(session), name=name
        )
        session.commit()
        console.print(f"Created collection {escape(collection.name)!r} (id {collection.id}).")


@collections_cli.command("rename")
def rename_command(
    name: Annotated[str, typer.Argument(help=PICK_HELP)],
    new_name: Annotated[str, typer.Argument(help="Its new name.")],
) -> None:
    """Rename a collection."""
    with exit_on_error(), open_session(load_settings()) as session:
        actor = as_user.actor(session)
        collection = collection_or_fail(session, name, action="collection_rename")
        acting.rename_collection(
            session=session, actor=actor, collection_id=collection.id, name=new_name
        )
        session.commit()
        console.print(f"Renamed to {escape(collection.name)!r}.")


@collections_cli.command("delete")
def delete_command(name: Annotated[str, typer.Argument(help=PICK_HELP)]) -> None:
    """Delete a collection and its questions' answers; its documents stay in the library."""
    with exit_on_error(), open_session(load_settings()) as session:
        collection = collection_or_fail(session, name, action="collection_delete")
        _allow_write(session, collection.id, "collection_delete")
        count = len(collections.document_ids_of(session=session, collection_id=collection.id))
        collections.delete_collection(session=session, collection_id=collection.id)
        session.commit()
        console.print(
            f"Deleted collection {escape(collection.name)!r}; its {count} document(s) stay in "
            "the library."
        )


def _change(name: str, document_ids: list[int], *, add: bool) -> None:
    with exit_on_error(), open_session(load_settings()) as session:
        actor = as_user.actor(session)
        collection = collection_or_fail(session, name, action="collection_write")
        if actor.is_admin:  # who may read every document is told which ids are missing
            missing = collections.missing_documents(session=session, document_ids=document_ids)
            if missing:
                listed = ", ".join(str(i) for i in missing)
                raise NotFound(f"There is no document with id {listed}; see `longdoc docs`.")
        # Anyone else: the collection's write grant, then each document readable, a missing
        # one refused in the words of one they may not read (whether adding or removing).
        acting.allow_add_documents(
            session=session, actor=actor, collection_id=collection.id, document_ids=document_ids
        )
        change = collections.add_documents if add else collections.remove_documents
        count = change(session=session, collection_id=collection.id, document_ids=document_ids)
        session.commit()
        verb = "Added" if add else "Removed"
        where = "to" if add else "from"
        console.print(f"{verb} {count} document(s) {where} {escape(collection.name)!r}.")


@collections_cli.command("add")
def add_command(
    name: Annotated[str, typer.Argument(help=PICK_HELP)],
    document_ids: Annotated[list[int], typer.Argument(help="Document ids (see `longdoc docs`).")],
) -> None:
    """Add documents to a collection (a document may be in several)."""
    _change(name, document_ids, add=True)


@collections_cli.command("remove")
def remove_command(
    name: Annotated[str, typer.Argument(help=PICK_HELP)],
    document_ids: Annotated[list[int], typer.Argument(help="Document ids.")],
) -> None:
    """Take documents out of a collection; they stay in the library."""
    _change(name, document_ids, add=False)


@collections_cli.command("show")
def show_command(name: Annotated[str, typer.Argument(help=PICK_HELP)]) -> None:
    """List a collection's documents."""
    with exit_on_error(), open_session(load_settings()) as session:
        collection = collection_or_fail(session, name, action="view")
        acting.open_collection(
            session=session, actor=as_user.actor(session), collection_id=collection.id
        )
        rows = collections.documents_of(session=session, collection_id=collection.id)
        table = Table("ID", "Title", "Kind", "Pages", "Status")
        for document in rows:
            table.add_row(
                str(document.id),
                escape(display_name(document.title or document.file_name)),
                document.kind.value,
                str(document.num_pages),
                document.status.value,
            )
        if rows:
            console.print(table)
        console.print(f"{escape(collection.name)!r} holds {len(rows)} document(s).")


def _day(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise typer.BadParameter("give a date as YYYY-MM-DD", param_hint=option) from None


def snippet_markup(hit: SearchHit) -> str:
    """The snippet with its matched words in bold, for rich."""
    return "".join(
        f"[bold yellow]{escape(terminal_text(p.text))}[/bold yellow]"
        if p.is_match
        else escape(terminal_text(p.text))
        for p in hit.snippet
    )


@commands.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="Words to find (every one, stemmed).")],
    collection: Annotated[
        str | None, typer.Option(help=f"Only this collection. {PICK_HELP}")
    ] = None,
    kind: Annotated[DocumentKind | None, typer.Option(help="Only this kind.")] = None,
    since: Annotated[str | None, typer.Option(help="Added on or after YYYY-MM-DD.")] = None,
    before: Annotated[str | None, typer.Option(help="Added before YYYY-MM-DD.")] = None,
    any_word: Annotated[
        bool, typer.Option("--any", help="Passages with any of the words, best first.")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=200, help="At most this many.")] = 20,
    words_only: Annotated[
        bool,
        typer.Option(
            "--words-only", help="Rank by the words alone, not also by the passage embeddings."
        ),
    ] = False,
) -> None:
    """Search the passages of the library: document, page and snippet, best match first (by
    words and, where the passages are embedded, by meaning)."""
    with exit_on_error():
        settings = load_settings()
        embedder = None if words_only else query_encoder(settings.embedding_model)
        with open_session(settings) as session:
            filters = SearchFilters(
                collection_id=(
                    collection_or_fail(session, collection, action="search").id
                    if collection
                    else None
                ),
                kind=kind,
                added_from=_day(since, "--since"),
                added_to=_day(before, "--before"),
            )
            hits = acting.search(
                session=session,
                actor=as_user.actor(session),
                query=query,
                filters=filters,
                limit=limit,
                match="any" if any_word else "all",
                embedder=embedder,
                max_query_chars=settings.max_search_chars,
            )
            for number, hit in enumerate(hits, start=1):
                console.print(
                    f"[bold]{number}. {escape(hit.title)}[/bold], p. {hit.page} "
                    f"(document {hit.document_id})"
                )
                console.print(f"   {snippet_markup(hit)}", highlight=False)
            console.print(f"{len(hits)} passage{'s' if len(hits) != 1 else ''} found.")


def print_collection_answer(out: Console, answer: CollectionAnswer) -> None:
    """The per-document table, or the answer as every way in shows it (worker.cli.output's
    print_view: its support label, its quotes with their documents and pages, the model's
    text set apart); then the cited pages."""
    if answer.rows:
        out.out(terminal_text(answer.answer), highlight=False)
        table = Table("Document", "Answer", "Quote", "Page", "From")
        for row in answer.rows:
            table.add_row(
                escape(display_name(row["title"])),
                escape(terminal_text(row["answer"])),
                escape(" ".join(terminal_text(row["quote"] or "").split())),
                str(row["page"] or ""),
                row_source(row["source"]),
            )
        out.print(table)
    else:
        print_view(out, view_of(answer), quotes_title="Quoted from the documents:")
    cited = ", ".join(f"[{display_name(c['title'])}, p. {c['page']}]" for c in answer.citations)
    out.print(f"Cited: {escape(cited) or 'none'}")
