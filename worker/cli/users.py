"""`longdoc users ...`: accounts and their grants on collections (admins only; the local admin
by default, see `--as`)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from app.db.models import Role
from app.services import accounts, api_keys, collections
from worker.cli import as_user
from worker.cli.collections import PICK_HELP, collection_or_fail
from worker.cli.common import console, exit_on_error, load_settings, open_session

commands = typer.Typer()
users_cli = typer.Typer(
    help="Accounts: add, list, disable, enable, reset-password, delete, grant, revoke, "
    "api-key, api-keys, revoke-key."
)
commands.add_typer(users_cli, name="users")

PasswordStdin = Annotated[
    bool, typer.Option("--password-stdin", help="Read the password from the first line of stdin.")
]


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return typer.prompt("Password", hide_input=True, confirmation_prompt=True)


@users_cli.command("add")
def add_command(
    name: Annotated[str, typer.Argument(help="The new user's name.")],
    role: Annotated[Role, typer.Option(help="admin, editor or viewer.")] = Role.VIEWER,
    password_stdin: PasswordStdin = False,
) -> None:
    """Add a user (the password asked twice, or read with --password-stdin)."""
    with exit_on_error():
        password = _password(password_stdin)
        with open_session(load_settings()) as session:
            actor = as_user.actor(session)
            accounts.add_user(session=session, actor=actor, name=name, role=role, password=password)
            session.commit()
    console.print(f"Added {escape(name)} ({role.value}).")


@users_cli.command("list")
def list_command() -> None:
    """List the users, their roles and their grants."""
    with exit_on_error(), open_session(load_settings()) as session:
        users = accounts.list_users(session=session, actor=as_user.actor(session))
        session.commit()
        names = collections.picker_labels(collections.list_collections(session=session))
        table = Table("Name", "Role", "State", "Collections")
        for user in users:
            grants = accounts.grants_of(session=session, user_id=user.id)
            granted = ", ".join(
                f"{names.get(g.collection_id, '?')} ({'write' if g.can_write else 'read'})"
                for g in grants
            )
            state = "disabled" if user.is_disabled else "enabled"
            table.add_row(escape(user.name), user.role.value, state, escape(granted) or "-")
        console.print(table)
        console.print(f"{len(users)} user{'s' if len(users) != 1 else ''}.")


@users_cli.command("disable")
def disable_command(name: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """Disable a user: they can no longer sign in, and their sessions end."""
    with exit_on_error(), open_session(load_settings()) as session:
        accounts.set_disabled(session=session, actor=as_user.actor(session), name=name)
        session.commit()
    console.print(f"Disabled {escape(name)}; their sessions have ended.")


@users_cli.command("enable")
def enable_command(name: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """Enable a disabled user again."""
    with exit_on_error(), open_session(load_settings()) as session:
        accounts.set_disabled(
            session=session, actor=as_user.actor(session), name=name, is_disabled=False
        )
        session.commit()
    console.print(f"Enabled {escape(name)}.")


@users_cli.command("reset-password")
def reset_password_command(
    name: Annotated[str, typer.Argument(help="The user.")], password_stdin: PasswordStdin = False
) -> None:
    """Give a user a new password; their sessions end."""
    with exit_on_error():
        password = _password(password_stdin)
        with open_session(load_settings()) as session:
            accounts.reset_password(
                session=session, actor=as_user.actor(session), name=name, password=password
            )
            session.commit()
    console.print(f"New password set for {escape(name)}; their sessions have ended.")


@users_cli.command("delete")
def delete_command(name: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """Delete a user; their documents stay (for the admins), and so do their audit log rows."""
    with exit_on_error(), open_session(load_settings()) as session:
        accounts.delete_user(session=session, actor=as_user.actor(session), name=name)
        session.commit()
    console.print(f"Deleted {escape(name)}; their audit log rows stay.")


@users_cli.command("grant")
def grant_command(
    name: Annotated[str, typer.Argument(help="The user.")],
    collection: Annotated[str, typer.Argument(help=PICK_HELP)],
    read: Annotated[bool, typer.Option("--read", help="Read and ask (the default).")] = False,
    write: Annotated[bool, typer.Option("--write", help="Also add, remove, ingest into.")] = False,
) -> None:
    """Let a user read (--read) or also change (--write) a collection."""
    if read and write:
        raise typer.BadParameter("Give --read or --write, not both.")
    with exit_on_error(), open_session(load_settings()) as session:
        found = collection_or_fail(session, collection, action="grant")
        accounts.grant(
            session=session,
            actor=as_user.actor(session),
            name=name,
            collection_id=found.id,
            can_write=write,
        )
        session.commit()
        label = found.name
    console.print(f"{escape(name)} may now {'write' if write else 'read'} {escape(label)!r}.")


@users_cli.command("revoke")
def revoke_command(
    name: Annotated[str, typer.Argument(help="The user.")],
    collection: Annotated[str, typer.Argument(help=PICK_HELP)],
) -> None:
    """Take back a user's grant on a collection."""
    with exit_on_error(), open_session(load_settings()) as session:
        found = collection_or_fail(session, collection, action="revoke")
        had = accounts.revoke(
            session=session, actor=as_user.actor(session), name=name, collection_id=found.id
        )
        session.commit()
        label = found.name
    if had:
        console.print(f"{escape(name)} no longer has access to {escape(label)!r}.")
    else:
        console.print(f"{escape(name)} had no grant on {escape(label)!r}.")


@users_cli.command("api-key")
def api_key_command(name: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """Make an API key for `longdoc serve` that acts as this user; it is shown once."""
    with exit_on_error(), open_session(load_settings()) as session:
        made = api_keys.create_key(session=session, actor=as_user.actor(session), name=name)
        session.commit()
        prefix = made.key.prefix
    print(made.secret)  # plain, on its own line: for a pipe as much as for a person
    console.print(
        f"API key {prefix} made for {escape(name)}; it will not be shown again "
        f"(`longdoc users revoke-key {prefix}` ends it)."
    )


@users_cli.command("api-keys")
def api_keys_command(
    name: Annotated[str | None, typer.Argument(help="Only this user's keys.")] = None,
) -> None:
    """List API keys by their prefix (never their secret)."""
    with exit_on_error(), open_session(load_settings()) as session:
        rows = api_keys.list_keys(session=session, actor=as_user.actor(session), name=name)
        session.commit()
        table = Table("Prefix", "User", "Made", "Last used", "State")
        for key, user_name in rows:
            table.add_row(
                key.prefix,
                escape(user_name),
                key.created_at.strftime("%Y-%m-%d %H:%M"),
                key.last_used_at.strftime("%Y-%m-%d %H:%M") if key.last_used_at else "-",
                "revoked" if key.revoked_at else "active",
            )
        console.print(table)
        console.print(f"{len(rows)} API key{'s' if len(rows) != 1 else ''}.")


@users_cli.command("revoke-key")
def revoke_key_command(
    prefix: Annotated[str, typer.Argument(help="The key's prefix (ldk_...).")],
) -> None:
    """Revoke an API key: `longdoc serve` refuses it from the next request."""
    with exit_on_error(), open_session(load_settings()) as session:
        was_active = api_keys.revoke_key(
            session=session, actor=as_user.actor(session), prefix=prefix
        )
        session.commit()
    if was_active:
        console.print(f"Revoked the API key {escape(prefix)}.")
    else:
        console.print(f"The API key {escape(prefix)} was revoked already.")
