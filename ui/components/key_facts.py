"""The document page's "Key facts" tab: each field's value with where it was read ("caption,
p. 1", "section 2 DOSAGE AND ADMINISTRATION, p. 3"), its rows where it has several (a label's
doses), its quote, a click to the page with the quote marked, how it was found, and a button
to extract them again."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app.db.models import Document, DocumentStatus, Fact, FactSource, JobKind, JobStatus
from app.services import facts as fact_service
from app.services import jobs
from ui import context as ctx
from ui.components.citations import open_citation
from ui.components.job_status import JobView, progress_line

SOURCE_BADGES = {
    FactSource.MODEL: ":green-badge[read by the model, checked against the quote]",
    FactSource.RULE: ":orange-badge[read by rule from the document's text]",
}
TABLE_COLUMNS = (("indication", "Indication"), ("population", "Population"), ("dose", "Dose"))
LiveJobs = Callable[[list[int]], None]


def _quote_block(text: str) -> str:
    # Each line quoted; the text is escaped so nothing in a document becomes markup.
    return "\n".join(f"> {ctx.md_escape(line)}" for line in text.splitlines() if line.strip())


def _cell(text: object) -> str:
    return ctx.md_escape(" ".join(str(text or "").split())) or "–"  # "|" is escaped too


def _table(rows: list[dict]) -> str:
    """A value's rows as a Markdown table (every cell escaped), with each row's page."""
    header = [title for _, title in TABLE_COLUMNS] + ["Page"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        cells = [_cell(row.get(key)) for key, _ in TABLE_COLUMNS] + [_cell(row.get("page"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fact(document_id: int, fact: Fact) -> None:
    with st.container(border=True):
        if fact.source == FactSource.NONE:
            st.markdown(f"**{ctx.md_escape(fact.label)}** · :gray[not found in the text]")
            return
        st.markdown(f"**{ctx.md_escape(fact.label)}** · {ctx.md_escape(fact.value)}")
        if fact.origin:
            st.caption(f"From: {ctx.md_escape(fact.origin)}")
        if fact.value_table:
            st.markdown(_table(fact.value_table))
        normalized = f" · normalised `{fact.normalized_value}`" if fact.normalized_value else ""
        st.caption(f"{SOURCE_BADGES[fact.source]} · confidence {fact.confidence:.2f}{normalized}")
        for index, quote in enumerate(fact.evidence or []):
            st.markdown(_quote_block(str(quote.get("text", ""))))
            page = quote.get("page")
            if page and st.button(
                f"p. {page}", key=f"fact-{fact.id}-{index}", icon=":material/description:"
            ):
                span = (int(quote["start_char"]), int(quote["end_char"]))
                open_citation(document_id, int(page), [], spans=[span])


def render_key_facts(
    document: Document,
    *,
    queue: Callable[[int, JobKind], None],
    live_jobs: LiveJobs,
    may_run: bool = True,
) -> None:
    """The tab's body. `queue(document_id, kind)` queues a job and `live_jobs(job_ids)` polls
    open jobs: the page's own helpers, shared with its other tabs. `may_run`: whether this
    user may extract them (app.services.access.can); if not, no button."""
    with ctx.session() as db:
        rows = fact_service.list_facts(session=db, document_id=document.id)
        rows_of_jobs = jobs.list_document_jobs(
            session=db, document_id=document.id, kind=JobKind.FACTS
        )
        views = [JobView.of(job) for job in rows_of_jobs]
    open_ids = [view.job_id for view in views if view.is_open]
    last = views[-1] if views else None
    if rows:
        num_found = sum(fact.source != FactSource.NONE for fact in rows)
        st.caption(
            f"{num_found} of {len(rows)} fields found. Every value is quoted from the page it "
            "cites; a field left empty was not found rather than guessed."
        )
        for fact in rows:
            _fact(document.id, fact)
    elif last is not None and last.status == JobStatus.SUCCEEDED:
        st.info("This kind of document has no key-fact schema.", icon=":material/info:")
    elif not open_ids:
        st.info("No key facts yet.", icon=":material/info:")
    if last is not None and last.status == JobStatus.FAILED:
        progress_line(last)
    if open_ids:
        live_jobs(open_ids)
    if not may_run:
        return
    label = "Extract key facts again" if rows else "Extract key facts"
    if st.button(
        label,
        icon=":material/fact_check:",
        disabled=bool(open_ids) or document.status != DocumentStatus.READY,
        key="extract-facts",
        help="Queue a new extraction; the current facts stay until the new ones are saved.",
    ):
        queue(document.id, JobKind.FACTS)
        st.rerun()
