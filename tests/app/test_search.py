"""Full-text search in the database (app/services/search.py) on SQLite and PostgreSQL: planted
sentences found at the right document and page, filters, and the index kept in step with
passage inserts, updates and document deletes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.db.models import DocumentKind, Passage
from app.services import collections, documents
from app.services.search import SearchFilters, query_words, search_passages
from tests.app.library_rows import FILLER, store

PLANTED = "Neither party may assign this Agreement without the prior written consent of the other."


def _library(session: Session):
    lease = store(session, "Office Lease", [FILLER, FILLER, PLANTED, FILLER])
    supply = store(session, "Supply Agreement", [FILLER, FILLER, FILLER])
    label = store(
        session,
        "Drug Label",
        ["Boxed warning: risk of serious liver injury.", FILLER],
        kind=DocumentKind.MEDICAL,
    )
    session.commit()
    return lease, supply, label


def test_search_finds_a_planted_sentence_at_its_document_and_page(session: Session) -> None:
    lease, _, _ = _library(session)
    hits = search_passages(session=session, query="assigned, with consent")
    assert [(hit.document_id, hit.page) for hit in hits] == [(lease.id, 3)]
    hit = hits[0]
    assert hit.title == "Office Lease"
    # Stemmed: "assigned" matched "assign"; matched words are marked in the snippet.
    assert {word.lower() for word in hit.matched_words} == {"assign", "consent"}
    assert "prior written" in hit.snippet_text


def test_a_passage_over_several_pages_names_the_page_of_the_match(session: Session) -> None:
    pages = [FILLER, FILLER, "Termination for convenience on ninety days notice.", FILLER]
    memo = store(session, "Services Memo", pages, span=(2, 4))
    session.commit()
    (hit,) = search_passages(session=session, query="termination convenience")
    assert (hit.document_id, hit.first_page, hit.last_page, hit.page) == (memo.id, 2, 4, 3)


def test_all_words_or_any_word_best_first(session: Session) -> None:
    lease, _, label = _library(session)
    assert search_passages(session=session, query="consent liver") == []
    hits = search_passages(session=session, query="consent liver", match="any")
    assert {hit.document_id for hit in hits} == {lease.id, label.id}
    scores = [hit.score for hit in search_passages(session=session, query="party", match="any")]
    assert scores == sorted(scores, reverse=True) and len(scores) >= 5


def test_filters_by_collection_kind_and_date(session: Session) -> None:
    lease, supply, label = _library(session)
    matter = collections.create_collection(session=session, name="Matter 7")
    collections.add_documents(session=session, collection_id=matter.id, document_ids=[supply.id])
    session.commit()

    def found(**filters) -> set[int]:
        hits = search_passages(
            session=session, query="parties", filters=SearchFilters(**filters), limit=50
        )
        return {hit.document_id for hit in hits}

    assert found() == {lease.id, supply.id, label.id}
    assert found(collection_id=matter.id) == {supply.id}
    assert found(kind=DocumentKind.MEDICAL) == {label.id}
    now = datetime.now(UTC)
    assert found(added_from=now - timedelta(hours=1)) == {lease.id, supply.id, label.id}
    assert found(added_to=now - timedelta(hours=1)) == set()


def test_the_index_follows_inserts_updates_and_deletes(session: Session, tmp_path: Path) -> None:
    lease, _, _ = _library(session)
    assert search_passages(session=session, query="indemnify") == []
    # A new document (the ingest write path) is searchable at once.
    late = store(session, "Late Addendum", [FILLER, "The supplier shall indemnify the buyer."])
    session.commit()
    assert [
        (h.document_id, h.page) for h in search_passages(session=session, query="indemnify")
    ] == [(late.id, 2)]
    # A passage's text rewritten (a re-split) is searched as it now reads.
    session.execute(
        update(Passage)
        .where(Passage.document_id == lease.id, Passage.ordinal == 2)
        .values(text="Assignment is free.")
    )
    session.commit()
    assert search_passages(session=session, query="written consent") == []
    assert len(search_passages(session=session, query="assignment free")) == 1
    # A deleted document (ON DELETE CASCADE to its passages) is gone from the index.
    documents.delete_document(session=session, document_id=late.id, files_dir=tmp_path)
    session.commit()
    assert search_passages(session=session, query="indemnify") == []


def test_queries_are_words_only(session: Session) -> None:
    _library(session)
    assert query_words('"consent" OR NEAR(assign) -- ; DROP') == [
        "consent",
        "near",
        "assign",
        "drop",
    ]
    assert search_passages(session=session, query="  ***  ") == []
    assert search_passages(session=session, query='consent" OR "') != []
