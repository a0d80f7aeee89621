"""`longdoc audit`: the audit log (admins only): who did what to which ids, when, from where."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from app.services import acting, audit
from app.services.access import require_role
from worker.cli import as_user
from worker.cli.common import console, exit_on_error, load_settings, open_session

commands = typer.Typer()


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(
            f"--since takes a date or time such as 2026-12-01 or 2026-12-01T09:30, not {value!r}."
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@commands.command("audit")
def audit_command(
    user: Annotated[str | None, typer.Option(help="Only this user's rows.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only rows from this day or time (UTC).")
    ] = None,
    export: Annotated[
        Path | None, typer.Option(help="Write the rows to this CSV file instead of printing.")
    ] = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Delete rows past LONGDOC_AUDIT_KEEP_DAYS.")
    ] = False,
) -> None:
    """Print or export the audit log: sign-ins, views, searches, questions, exports, uploads,
    deletions, grants and user changes, with ids and lengths, never document text."""
    moment = _since(since)
    settings = load_settings()
    with exit_on_error(), open_session(settings) as session:
        actor = as_user.actor(session)
        if prune:
            require_role(session=session, actor=actor, action="audit_prune", allowed=actor.is_admin)
            count = audit.prune(session=session, keep_days=settings.audit_keep_days)
            session.commit()
            console.print(f"Pruned {count} row(s) older than {settings.audit_keep_days:g} days.")
            return
        events = acting.read_audit(session=session, actor=actor, user_name=user, since=moment)
        if export is not None:
            export.write_text(audit.render_csv(events), encoding="utf-8")
            console.print(f"Wrote {len(events)} row(s) to {escape(str(export))}.")
            return
        table = Table("When (UTC)", "User", "Action", "Outcome", "Ids", "Details", "From")
        for event in events:
            table.add_row(
                event.at.strftime("%Y-%m-%d %H:%M:%S"),
                escape(event.user_name),
                event.action,
                event.outcome,
                f"{event.target_kind} {' '.join(map(str, event.target_ids))}".strip(),
                " ".join(f"{k}={v}" for k, v in sorted(event.details.items())),
                escape(event.origin),
            )
        console.print(table)
        console.print(f"{len(events)} row(s).")
