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

if not require_login(settings.ui_password_hash):
    st.stop()

navigation = st.navigation(
    {
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
)
with st.sidebar:
    st.markdown("### :material/menu_book: LongDoc")
    st.caption("Summaries and cited answers for long legal and medical PDFs.")
sidebar.render()
navigation.run()
