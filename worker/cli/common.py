"""What every `longdoc` command shares: the consoles, one way to fail (a sentence on stderr,
exit status 1, no traceback) and a session on a database at the newest migration."""

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from app.db.session import database_unavailable, make_engine, session_factory, sqlite_file
from app.errors import AppError, DatabaseNotMigrated
from app.migrate import require_head
from app.settings import Settings, load_settings

__all__ = ["console", "error_console", "exit_on_error", "load_settings", "open_session"]

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
