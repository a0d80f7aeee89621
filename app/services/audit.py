"""The audit log: who did what to which ids, when, from where, and whether it was allowed.

Rows hold ids, counts and lengths, never text of documents, questions or answers: `record`
refuses a `details` value that is not a number or a boolean. The table is append-only (the
database refuses updates, migration 0013); `prune` deletes rows older than the retention
setting (LONGDOC_AUDIT_KEEP_DAYS), and nothing else deletes them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.models import AuditEvent, utc_now

OK = "ok"
REFUSED = "refused"
FAILED = "failed"
LOCKED = "locked"
OUTCOMES = (OK, REFUSED, FAILED, LOCKED)
CSV_COLUMNS = (
    "id",
    "at",
    "user_id",
    "user_name",
    "action",
    "outcome",
    "target_kind",
    "target_ids",
    "details",
    "origin",
)


@dataclass(frozen=True)
class Who:
    """Whom a row names: the user (None: the local admin, or a name that matched no user) and
    where they came from ("cli", "ui 10.0.0.7", "inbox")."""

    user_id: int | None
    name: str
    origin: str


def record(
    *,
    session: Session,
    who: Who,
    action: str,
    outcome: str = OK,
    target_kind: str = "",
    target_ids: Iterable[int] = (),
    details: Mapping[str, int | float | bool] | None = None,
) -> AuditEvent:
    """Add one row to the session (flushed; the caller commits)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}")
    numbers = dict(details or {})
    for key, value in numbers.items():
        if not isinstance(value, int | float | bool):
            # Text (a title, a question, a page) must never reach the log: only its length.
            raise TypeError(f"audit detail {key!r} must be a number, not {type(value).__name__}")
    event = AuditEvent(
        at=utc_now(),
        user_id=who.user_id,
        user_name=who.name[:100],
        action=action,
        outcome=outcome,
        target_kind=target_kind,
        target_ids=[int(i) for i in target_ids],
        details=numbers,
        origin=who.origin[:100],
    )
    session.add(event)
    session.flush()
    return event


def list_events(
    *,
    session: Session,
    user_name: str | None = None,
    since: datetime | None = None,
    outcome: str | None = None,
    limit: int | None = None,
) -> list[AuditEvent]:
    """Oldest first."""
    query = select(AuditEvent).order_by(AuditEvent.at, AuditEvent.id)
    if user_name is not None:
        query = query.where(AuditEvent.user_name == user_name)
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    if outcome is not None:
        query = query.where(AuditEvent.outcome == outcome)
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def render_csv(events: Sequence[AuditEvent]) -> str:
    """The rows as CSV, a header first; ids joined by spaces, details as key=value."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for event in events:
        writer.writerow(
            (
                event.id,
                event.at.isoformat(),
                "" if event.user_id is None else event.user_id,
                _cell(event.user_name),
                event.action,
                event.outcome,
                event.target_kind,
                " ".join(str(i) for i in event.target_ids),
                " ".join(f"{key}={value}" for key, value in sorted(event.details.items())),
                _cell(event.origin),
            )
        )
    return buffer.getvalue()


def _cell(value: str) -> str:
    # A user name is chosen by a person: never a spreadsheet formula (CSV injection).
    return "'" + value if value.startswith(("=", "+", "-", "@", "\t", "\r")) else value


def prune(*, session: Session, keep_days: float, now: datetime | None = None) -> int:
    """Delete rows older than `keep_days`; returns how many (the caller commits)."""
    cutoff = (now or utc_now()) - timedelta(days=keep_days)
    result = session.execute(delete(AuditEvent).where(AuditEvent.at < cutoff))
    return int(result.rowcount or 0)
