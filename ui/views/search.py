"""Search: the library's passages by their words (the database's full-text search), filtered
by collection, kind and date; each result names its document and page, shows a snippet with
the matched words marked, and opens the page with the passage marked."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import streamlit as st

from app.db.models import DocumentKind
from app.errors import AppError
from app.query_encoder import query_encoder
from app.services import acting, collections
from app.services.search import SearchFilters, SearchHit
from ui import context as ctx
from ui.components.citations import CITATION_KEY, open_citation, render_open_citation

NUM_RESULTS = 30


def snippet_markdown(hit: SearchHit) -> str:
    """The snippet as Markdown, matched words in bold; the text itself escaped, and the spaces
    between the parts kept (escaping trims each part: "The" "deposit" "of" ran together)."""
    out = []
    for part in hit.snippet:
        text = ctx.md_escape(part.text)
        if part.is_match and text:
            text = f"**{text}**"
        before = " " if part.text[:1].isspace() else ""
        after = " " if part.text[-1:].isspace() and text else ""
        out.append(f"{before}{text}{after}")
    return "".join(out)


def _start_of(day: date | None) -> datetime | None:
    return None if day is None else datetime.combine(day, time(), tzinfo=UTC)


def _filters() -> SearchFilters:
    with ctx.session() as db:
        readable = acting.list_collections(session=db, actor=ctx.actor())
        choices = collections.picker_labels(readable)
    cells = st.columns(4)
    collection_id = cells[0].selectbox(
        "Collection",
        list(choices),
        format_func=lambda i: choices[i],
        index=None,
        placeholder="Every document",
        key="search-collection",
    )
    kind = cells[1].selectbox(
        "Kind",
        list(DocumentKind),
        format_func=lambda k: k.value.capitalize(),
        index=None,
        placeholder="Any kind",
        key="search-kind",
    )
    since = cells[2].date_input("Added from", value=None, key="search-since")
    until = cells[3].date_input("Added until", value=None, key="search-until")
    return SearchFilters(
        collection_id=collection_id,
        kind=kind,
        added_from=_start_of(since),
        added_to=_start_of(until + timedelta(days=1)) if until else None,
    )


def _result(number: int, hit: SearchHit) -> None:
    with st.container(border=True):
        st.markdown(f"**{number}. {ctx.md_escape(hit.title)}**, p. {hit.page}")
        st.markdown(snippet_markdown(hit))
        with st.container(horizontal=True, gap="small"):
            if st.button(
                f"Read p. {hit.page}",
                key=f"hit-{hit.passage_id}",
                icon=":material/description:",
                help="Open the page with this passage marked.",
            ):
                open_citation(
                    hit.document_id,
                    hit.page,
                    [hit.passage_id],
                    marked="the passage that matched the search",
                )
            ctx.document_link(hit.document_id, "Open the document")


def render() -> None:
    try:
        _page()
    except AppError as error:
        ctx.show_error(error)


def _page() -> None:
    st.title("Search")
    st.caption(
        "Finds passages by their words (stemmed: *assigned* finds *assignment*); among them, "
        "those closest in meaning to the query come first where the passages are embedded."
    )
    query = st.text_input(
        "Words to find",
        max_chars=ctx.settings().max_search_chars,
        key="search-query",
        placeholder="assign consent",
    )
    filters = _filters()
    any_word = st.toggle("Any of the words (best first)", key="search-any")
    if not query.strip():
        return
    embedder = query_encoder(ctx.settings().embedding_model)  # loaded once per process
    with ctx.session() as db:
        hits = acting.search(
            session=db,
            actor=ctx.actor(),
            query=query,
            filters=filters,
            limit=NUM_RESULTS,
            match="any" if any_word else "all",
            embedder=embedder,
            max_query_chars=ctx.settings().max_search_chars,
        )
    if not hits:
        st.info("No passage matches.", icon=":material/search_off:")
        return
    st.caption(f"{len(hits)} passage{'s' if len(hits) != 1 else ''}, best match first.")
    for number, hit in enumerate(hits, start=1):
        _result(number, hit)
    citation = st.session_state.get(CITATION_KEY)
    if citation:
        render_open_citation(citation["document_id"])


render()
