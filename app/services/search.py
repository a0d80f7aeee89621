"""Full-text search of passages with the database's own engine (migration 0007).

SQLite: the FTS5 table `passages_fts`, ranked by BM25 (`bm25()`, lower is better; we negate it),
snippets by `snippet()`. PostgreSQL: `passages.search_vector` @@ to_tsquery('english', ...),
ranked by ts_rank, snippets by ts_headline. Both stem English words (porter / the english
configuration), so "assigned" finds "assignment"'s stem "assign".

The query is reduced to its words (letters and digits), so no user text reaches either engine's
query syntax: match="all" wants every word (the search page), match="any" at least one, ranked by
how well each passage matches (retrieval for a question). Two steps keep it fast at 100,000
passages: the ranked ids first (LIMIT), then snippets and pages for those few only.

Given a query embedder, the best NUM_CANDIDATES passages by their words are re-ranked with
their stored embeddings, where they have them (app.services.search_fusion), before the cut to
`limit`: a passage that says what the query means rises above one that only repeats its words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.db.models import DocumentKind
from app.display import display_name
from app.services.questions import typed_search
from app.services.search_fusion import NUM_CANDIDATES, QueryEmbedder, fuse_with_embeddings
from app.settings import MAX_SEARCH_CHARS

MATCH_START, MATCH_END = "\x02", "\x03"  # around matched words in a snippet; never in page text
MAX_QUERY_WORDS = 32
SNIPPET_WORDS = 24
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# PostgreSQL's english configuration drops these; SQLite's FTS5 would demand them, so both
# databases get the same query.
_STOP_WORDS_TEXT = (
    "a about above after again against all am an and any are as at be because been before being "
    "below between both but by can did do does doing down during each few for from further had "
    "has have having he her here hers herself him himself his how i if in into is it its itself "
    "just me more most my myself no nor not now of off on once only or other our ours ourselves "
    "out over own s same she should so some such t than that the their theirs them themselves "
    "then there these they this those through to too under until up very was we were what when "
    "where which while who whom why will with you your yours yourself yourselves"
)
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
Match = Literal["all", "any"]


@dataclass(frozen=True)
class SearchFilters:
    collection_id: int | None = None
    kind: DocumentKind | None = None
    added_from: datetime | None = None  # documents added at or after
    added_to: datetime | None = None  # documents added before
    document_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class SnippetPart:
    text: str
    is_match: bool


@dataclass(frozen=True)
class SearchHit:
    passage_id: int
    document_id: int
    title: str  # the document's title, else its file name
    kind: str
    page: int  # the page holding the first matched word
    first_page: int
    last_page: int
    passage_ordinal: int
    score: float  # higher is better; comparable within one search only
    snippet: tuple[SnippetPart, ...] = field(default=())

    @property
    def snippet_text(self) -> str:
        return "".join(part.text for part in self.snippet)

    @property
    def matched_words(self) -> list[str]:
        return [part.text for part in self.snippet if part.is_match]


def query_words(query: str) -> list[str]:
    """The query's distinct words, lower-cased, in order, without stop words (at most
    MAX_QUERY_WORDS)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOP_WORDS:
            seen.setdefault(word, None)
    return list(seen)[:MAX_QUERY_WORDS]


def search_passages(
    *,
    session: Session,
    query: str,
    filters: SearchFilters | None = None,
    limit: int = 20,
    match: Match = "all",
    embedder: QueryEmbedder | None = None,
    max_query_chars: int | None = MAX_SEARCH_CHARS,
) -> list[SearchHit]:
    """The passages matching `query`, best first, at most `limit`; [] for a query of no words.
    With `embedder`, ranked by words and meaning together (the module docstring). The query is
    read as typed (app.services.questions.typed_search): longer than `max_query_chars` is
    InvalidQuestion; None (a question job's retrieval, its question checked when it was asked)
    takes any length. The embedder embeds at most its model's trained length of it."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    query = typed_search(query, max_chars=max_query_chars)
    words = query_words(query)
    if not words:
        return []
    filters = filters or SearchFilters()
    is_sqlite = session.get_bind().dialect.name == "sqlite"
    if embedder is None:
        ranked = _ranked(session, words, filters, limit, match)
    else:
        # The query is embedded while the database ranks: numpy and the database driver both
        # release the GIL, so the two overlap (bench/results/search.md).
        with ThreadPoolExecutor(max_workers=1) as pool:
            query_vector = pool.submit(embedder.embed, [query])
            candidates = _ranked(session, words, filters, max(limit, NUM_CANDIDATES), match)
            ranked = fuse_with_embeddings(
                session,
                candidates,
                embedder,
                lambda: np.asarray(query_vector.result(), dtype=np.float32)[0],
            )[:limit]
    if not ranked:
        return []
    ids = [passage_id for passage_id, _ in ranked]
    snippets = (_snippets_sqlite if is_sqlite else _snippets_postgres)(session, words, ids, match)
    rows = _passage_rows(session, ids)
    pages = _pages_of_hits(session, rows, snippets)
    hits = []
    for passage_id, score in ranked:
        row = rows[passage_id]
        parts = _parts(snippets.get(passage_id, ""))
        hits.append(
            SearchHit(
                passage_id=passage_id,
                document_id=row["document_id"],
                title=display_name(row["title"] or row["file_name"]),
                kind=row["kind"],
                page=pages.get(passage_id, row["first_page"]),
                first_page=row["first_page"],
                last_page=row["last_page"],
                passage_ordinal=row["ordinal"],
                score=float(score),
                snippet=parts,
            )
        )
    return hits


def _ranked(session, words, filters, limit, match) -> list[tuple[int, float]]:
    is_sqlite = session.get_bind().dialect.name == "sqlite"
    return (_ranked_sqlite if is_sqlite else _ranked_postgres)(
        session, words, filters, limit, match
    )


def _filter_sql(filters: SearchFilters, params: dict) -> tuple[str, str]:
    """(JOIN clause, AND conditions) for the filters; `params` gets their values."""
    join, conditions = "", []
    if filters.collection_id is not None:
        join = (
            " JOIN collection_documents cd ON cd.document_id = p.document_id"
            " AND cd.collection_id = :collection_id"
        )
        params["collection_id"] = filters.collection_id
    if filters.kind is not None:
        conditions.append("d.kind = :kind")
        params["kind"] = DocumentKind(filters.kind).value
    if filters.added_from is not None:
        conditions.append("d.created_at >= :added_from")
        params["added_from"] = filters.added_from
    if filters.added_to is not None:
        conditions.append("d.created_at < :added_to")
        params["added_to"] = filters.added_to
    if filters.document_ids is not None:
        ids = [int(i) for i in filters.document_ids] or [-1]
        conditions.append(f"p.document_id IN ({', '.join(str(i) for i in ids)})")
    return join, "".join(f" AND {condition}" for condition in conditions)


def _fts5_query(words: Sequence[str], match: Match) -> str:
    # Every word double-quoted: a string of letters and digits, never FTS5 syntax.
    return (" " if match == "all" else " OR ").join(f'"{word}"' for word in words)


def _tsquery(words: Sequence[str], match: Match) -> str:
    return (" & " if match == "all" else " | ").join(words)


def _ranked_sqlite(session, words, filters, limit, match) -> list[tuple[int, float]]:
    params: dict = {"q": _fts5_query(words, match), "limit": limit}
    join, where = _filter_sql(filters, params)
    # The FTS table alone ranks fastest (no join per match); filters become one set of
    # passage ids, built once, that each match is looked up in. The "+" keeps SQLite from
    # handing the IN to FTS5 as rowid lookups, one full-text query per id (seconds, not ms).
    restrict = ""
    if join or where:
        restrict = (
            " AND +rowid IN (SELECT p.id FROM passages p JOIN documents d ON d.id = p.document_id"
            + join
            + " WHERE 1 = 1"
            + where
            + ")"
        )
    sql = (
        "SELECT rowid, bm25(passages_fts) AS score FROM passages_fts"
        " WHERE passages_fts MATCH :q"
        + restrict
        # The id breaks ties, so equal scores come back in the same order every time.
        + " ORDER BY score, rowid LIMIT :limit"
    )
    return [(row[0], -row[1]) for row in session.execute(text(sql), params)]


def _ranked_postgres(session, words, filters, limit, match) -> list[tuple[int, float]]:
    params: dict = {"q": _tsquery(words, match), "limit": limit}
    join, where = _filter_sql(filters, params)
    sql = (
        "SELECT p.id, ts_rank(p.search_vector, q.query) AS score"
        " FROM passages p CROSS JOIN to_tsquery('english', :q) AS q(query)"
        " JOIN documents d ON d.id = p.document_id"
        + join
        + " WHERE p.search_vector @@ q.query"
        + where
        + " ORDER BY score DESC, p.id LIMIT :limit"
    )
    return [(row[0], row[1]) for row in session.execute(text(sql), params)]


def _id_list(ids: Sequence[int]) -> str:
    return ", ".join(str(int(i)) for i in ids)


def _snippets_sqlite(session, words, ids, match) -> dict[int, str]:
    sql = (
        "SELECT rowid, snippet(passages_fts, 0, char(2), char(3), '…', :num_words)"
        f" FROM passages_fts WHERE passages_fts MATCH :q AND rowid IN ({_id_list(ids)})"
    )
    params = {"q": _fts5_query(words, match), "num_words": SNIPPET_WORDS}
    return {row[0]: row[1] for row in session.execute(text(sql), params)}


def _snippets_postgres(session, words, ids, match) -> dict[int, str]:
    options = (
        f"StartSel={MATCH_START}, StopSel={MATCH_END}, MaxWords={SNIPPET_WORDS}, MinWords=8, "
        'MaxFragments=2, FragmentDelimiter=" … "'
    )
    sql = (
        "SELECT p.id, ts_headline('english', p.text, to_tsquery('english', :q), :options)"
        f" FROM passages p WHERE p.id IN ({_id_list(ids)})"
    )
    params = {"q": _tsquery(words, match), "options": options}
    return {row[0]: row[1] for row in session.execute(text(sql), params)}


def _passage_rows(session, ids) -> dict[int, dict]:
    sql = (
        "SELECT p.id, p.document_id, p.ordinal, p.first_page, p.last_page, d.title, d.file_name,"
        f" d.kind FROM passages p JOIN documents d ON d.id = p.document_id"
        f" WHERE p.id IN ({_id_list(ids)})"
    )
    return {row.id: row._asdict() for row in session.execute(text(sql))}


def _pages_of_hits(session, rows: dict[int, dict], snippets: dict[int, str]) -> dict[int, int]:
    """For hits whose passage spans pages: the first page holding a matched word."""
    spanning = {i: row for i, row in rows.items() if row["first_page"] != row["last_page"]}
    if not spanning:
        return {}
    conditions = " OR ".join(
        f"(document_id = {int(row['document_id'])} AND number BETWEEN "
        f"{int(row['first_page'])} AND {int(row['last_page'])})"
        for row in spanning.values()
    )
    texts: dict[tuple[int, int], str] = {
        (row[0], row[1]): row[2].lower()
        for row in session.execute(
            text(f"SELECT document_id, number, text FROM pages WHERE {conditions}")
        )
    }
    found = {}
    for passage_id, row in spanning.items():
        matched = [p.text.lower() for p in _parts(snippets.get(passage_id, "")) if p.is_match]
        for number in range(row["first_page"], row["last_page"] + 1):
            page_text = texts.get((row["document_id"], number), "")
            if any(word in page_text for word in matched):
                found[passage_id] = number
                break
    return found


def _parts(snippet: str) -> tuple[SnippetPart, ...]:
    """Split a marked snippet into plain and matched parts; whitespace collapsed."""
    parts, is_match = [], False
    for piece in re.split(f"([{MATCH_START}{MATCH_END}])", snippet):
        if piece == MATCH_START:
            is_match = True
        elif piece == MATCH_END:
            is_match = False
        elif piece:
            collapsed = re.sub(r"\s+", " ", piece)
            parts.append(SnippetPart(collapsed, is_match))
    return tuple(parts)
