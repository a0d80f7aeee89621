"""The audit log, for admins (accounts, issue 25): who did what to which ids, when, from where.
Rows hold ids and lengths, never document text; the CSV is the one `longdoc audit --export`
writes."""

from __future__ import annotations

from datetime import UTC, datetime, time

import streamlit as st

from app.errors import AppError
from app.services import acting, audit
from ui import context as ctx

MAX_ROWS_SHOWN = 500


def _page() -> None:
    st.title("Audit log")
    left, right = st.columns(2)
    user = left.text_input("User", key="audit-user", max_chars=100).strip() or None
    day = right.date_input("Since", value=None, key="audit-since")
    since = None if day is None else datetime.combine(day, time.min, tzinfo=UTC)
    with ctx.session() as db:
        events = acting.read_audit(session=db, actor=ctx.actor(), user_name=user, since=since)
    st.caption(f"{len(events)} row(s); the newest {min(len(events), MAX_ROWS_SHOWN)} shown.")
    st.download_button(
        "Export CSV",
        audit.render_csv(events),
        file_name="longdoc-audit.csv",
        mime="text/csv",
        icon=":material/download:",
    )
    st.dataframe(
        [
            {
                "When (UTC)": event.at.strftime("%Y-%m-%d %H:%M:%S"),
                "User": event.user_name,
                "Action": event.action,
                "Outcome": event.outcome,
                "Ids": f"{event.target_kind} {' '.join(map(str, event.target_ids))}".strip(),
                "Details": " ".join(f"{k}={v}" for k, v in sorted(event.details.items())),
                "From": event.origin,
            }
            for event in reversed(events[-MAX_ROWS_SHOWN:])
        ],
        hide_index=True,
        width="stretch",
    )


def render() -> None:
    try:
        _page()
    except AppError as error:
        ctx.show_error(error)


render()
