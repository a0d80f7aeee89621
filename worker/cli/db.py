"""`longdoc db upgrade` and `longdoc db current`: create the database or say where it stands."""

import typer
from rich.markup import escape

from app.db.session import display_url, make_engine, sqlite_file
from app.migrate import current_revision, head_revision, upgrade
from app.services import accounts
from worker.cli.common import console, exit_on_error, load_settings, open_session

commands = typer.Typer()
db_cli = typer.Typer(help="Create or inspect the database schema.", no_args_is_help=True)
commands.add_typer(db_cli, name="db")


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Create the database, or bring its schema up to the newest migration."""
    with exit_on_error():
        settings = load_settings()
        upgrade(settings.database_url)
        where = display_url(settings.database_url)
        console.print(f"Database at {escape(where)} is at revision {head_revision()} (newest).")
        # Accounts (issue 25): the shared UI password becomes the first admin's.
        with open_session(settings) as session:
            if accounts.ensure_first_admin(
                session=session, password_hash=settings.ui_password_hash
            ):
                console.print(
                    f"The shared UI password now signs in as the user "
                    f"{accounts.FIRST_ADMIN_NAME!r} (an admin)."
                )


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
