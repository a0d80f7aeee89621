"""The summary: its lead from the document's key facts (a court, the parties, a date, the
outcome), then the model's sentences: those that rest on a passage of the document with its
page, the others set apart with the reason; each line's passage a click away."""

from __future__ import annotations

import streamlit as st

from app.db.models import Summary
from app.services.summary_sentences import (
    NONE_SUPPORTED,
    UNSUPPORTED,
    nothing_stated,
    quoted_instead,
    sentence_views,
    support_line,
    was_checked,
)
from ui import context as ctx
from ui.components.quotes import render_quotes


def render_checked_summary(document_id: int, summary: Summary) -> None:
    """The summary as checked (Summary.sentence_support); as written when it was not. Its lead
    (Summary.lead, from the key facts) comes first."""
    lead = sentence_views(summary.lead or [])
    if lead:
        with st.container(border=True):
            st.caption("From the key facts, each quoted from the document")
            st.markdown(
                "  \n".join(f"{ctx.md_escape(view.text)} (p. {view.page})" for view in lead)
            )
    views = sentence_views(summary.sentence_support or [])
    instead = quoted_instead(has_lead=bool(lead), has_key_passages=bool(summary.key_passages))
    if not views:
        with st.container(border=True):
            if was_checked(summary.stats):
                st.markdown(f"_{nothing_stated(summary.stats)} {instead}".strip() + "_")
            else:
                st.markdown(summary.text)
        return
    supported = [view for view in views if view.is_supported]
    apart = [view for view in views if not view.is_supported]
    st.caption(ctx.md_escape(support_line(views)))
    with st.container(border=True):
        if supported:
            st.markdown(
                " ".join(f"{ctx.md_escape(view.text)} (p. {view.page})" for view in supported)
            )
        else:
            st.markdown(f"_{NONE_SUPPORTED} {instead}".strip() + "_")
    if apart:
        st.markdown("###### Set apart: not supported by the document")
        for view in apart:
            colour = "red" if view.status == UNSUPPORTED else "gray"
            st.markdown(f":{colour}[{ctx.md_escape(view.text)}] · {ctx.md_escape(view.note)}")
    if supported or lead:
        with st.expander("The passage behind each sentence"):
            for index, view in enumerate([*lead, *supported]):
                st.markdown(f"**{ctx.md_escape(view.text)}**")
                render_quotes(
                    document_id, view.quotes[:1], key=f"sentence-{summary.id}-{index}", title=""
                )
