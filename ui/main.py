"""LongDoc's web UI: `python -m ui.launch` (or `streamlit run ui/main.py`).

Not named app.py: Streamlit puts this folder first on sys.path, where an `app` module would
hide the `app` package.

The shell: page setup, the optional password, navigation and the sidebar. Pages live in
ui/views/ and reach the rest of LongDoc only through `app` (services, settings), queueing
background work by task name (app/services/dispatch.py).
"""

from __future__ import annotations

import streamlit as st

from app.errors import AppError
from ui import context as ctx
from ui import sidebar
from ui.auth import require_login

st.set_page_config(
    page_title="LongDoc",
    page_icon=":material/menu_book:",
    layout="wide",
    initial_sidebar_state="expanded",
)

try:
    settings = ctx.settings()
except AppError as error:
    ctx.show_error(error)
    st.stop()
ctx.serve_metrics(settings)


def _pages(*, is_admin: bool) -> dict[str, list[st.Page]]:
    pages = {
        "Documents": [
            st.Page(
                ctx.LIBRARY_PAGE, title="Library", icon=":material/library_books:", default=True
            ),
            st.Page(ctx.UPLOAD_PAGE, title="Upload", icon=":material/upload_file:"),
            st.Page(ctx.DOCUMENT_PAGE, title="Document", icon=":material/description:"),
            st.Page(ctx.SEARCH_PAGE, title="Search", icon=":material/search:"),
            st.Page(ctx.COLLECTIONS_PAGE, title="Collections", icon=":material/folder_copy:"),
        ],
        "Engine": [
            st.Page(ctx.MONITORING_PAGE, title="Monitoring", icon=":material/monitoring:"),
        ],
    }
    if is_admin:  # accounts (issue 25): the audit log, for admins only
        pages["Admin"] = [st.Page(ctx.AUDIT_PAGE, title="Audit log", icon=":material/policy:")]
    return pages


try:
    actor = require_login(settings)
except AppError as error:
    ctx.show_error(error)
    st.stop()
if actor is None:
    # The pages known but hidden and not run: a link to a page (/document?doc=7) is still
    # that page once signed in, where the page itself decides whether this user may see it.
    st.navigation(_pages(is_admin=True), position="hidden")
    st.stop()

navigation = st.navigation(_pages(is_admin=actor.is_admin))
with st.sidebar:
    st.markdown("### :material/menu_book: LongDoc")
    st.caption("Summaries and cited answers for long legal and medical PDFs.")
sidebar.render_account(actor)
sidebar.render()
navigation.run()
