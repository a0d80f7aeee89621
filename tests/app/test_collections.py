"""Collections (app/services/collections.py) on SQLite and PostgreSQL: names, membership, and
the cascade rules: deleting a collection never deletes a document; deleting a document removes
it from its collections and deletes the collection answers that quote it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import CollectionAnswer, Document, Job, JobKind
from app.errors import InvalidCollection
from app.services import collections, documents, jobs
from tests.app.library_rows import FILLER, store


def _answer(session: Session, collection_id: int, document_ids: list[int]) -> None:
    session.add(
        CollectionAnswer(
            collection_id=collection_id,
            question="q",
            mode="retrieval",
            answer="a",
            document_ids=document_ids,
            model="m",
        )
    )
    session.flush()


def _count(session: Session, model) -> int:
    return session.scalar(select(func.count()).select_from(model))


def test_create_rename_and_names_that_cannot_be_used(session: Session) -> None:
    matter = collections.create_collection(session=session, name="  Acme   v. Beta ")
    assert matter.name == "Acme v. Beta"
    with pytest.raises(InvalidCollection, match="already a collection"):
        collections.create_collection(session=session, name="acme v. beta")
    with pytest.raises(InvalidCollection, match="needs a name"):
        collections.create_collection(session=session, name=" \t")
    other = collections.create_collection(session=session, name="Papers")
    with pytest.raises(InvalidCollection, match="already a collection"):
        collections.rename_collection(session=session, collection_id=other.id, name="Acme v. Beta")
    renamed = collections.rename_collection(session=session, collection_id=other.id, name="Lit")
    assert renamed is not None and renamed.name == "Lit"
    assert collections.rename_collection(session=session, collection_id=999, name="x") is None
    assert collections.find_collection(session=session, name="ACME V. BETA").id == matter.id
    session.commit()
    assert [(c.name, c.num_documents) for c in collections.list_collections(session=session)] == [
        ("Acme v. Beta", 0),
        ("Lit", 0),
    ]


def test_names_that_look_the_same_are_the_same_name(session: Session) -> None:
    composed = collections.create_collection(session=session, name="Caf\u00e9 matters")
    assert composed.name == "Café matters"
    # "e" + combining acute: displays the same; NFKC makes it the composed name.
    with pytest.raises(InvalidCollection, match="already a collection"):
        collections.create_collection(session=session, name="Cafe\u0301 matters")
    # Case aside beyond ASCII (SQLite's lower() would miss "É"), and a zero-width space inside.
    with pytest.raises(InvalidCollection, match="already a collection"):
        collections.create_collection(session=session, name="CAF\u00c9 \u200bMATTERS")
    assert collections.find_collection(session=session, name="café MATTERS").id == composed.id
    with pytest.raises(InvalidCollection, match="at least one visible character"):
        collections.create_collection(session=session, name="\u200b\u200c\u2060\ufeff")
    decomposed_new = collections.create_collection(session=session, name="Re\u0301sume\u0301s")
    assert decomposed_new.name == "Résumés"


def test_a_document_in_several_collections_added_once_each(session: Session) -> None:
    lease = store(session, "Office Lease", [FILLER])
    supply = store(session, "Supply Agreement", [FILLER])
    one = collections.create_collection(session=session, name="One")
    two = collections.create_collection(session=session, name="Two")
    assert (
        collections.add_documents(
            session=session, collection_id=one.id, document_ids=[lease.id, supply.id, 12345]
        )
        == 2
    )
    assert (
        collections.add_documents(session=session, collection_id=one.id, document_ids=[lease.id])
        == 0
    )
    assert (
        collections.add_documents(session=session, collection_id=two.id, document_ids=[lease.id])
        == 1
    )
    assert collections.missing_documents(session=session, document_ids=[lease.id, 12345]) == [12345]
    session.commit()
    assert [c.name for c in collections.collections_of(session=session, document_id=lease.id)] == [
        "One",
        "Two",
    ]
    assert (
        collections.remove_documents(session=session, collection_id=one.id, document_ids=[lease.id])
        == 1
    )
    session.commit()
    assert collections.document_ids_of(session=session, collection_id=one.id) == [supply.id]
    assert session.get(Document, lease.id) is not None  # removed from the collection, not deleted


def test_deleting_a_collection_keeps_its_documents(session: Session) -> None:
    lease = store(session, "Office Lease", [FILLER])
    matter = collections.create_collection(session=session, name="Matter")
    collections.add_documents(session=session, collection_id=matter.id, document_ids=[lease.id])
    _answer(session, matter.id, [lease.id])
    job = jobs.create_job(session=session, kind=JobKind.ANSWER, params={"question": "q"})
    job.collection_id = matter.id
    session.commit()
    assert collections.delete_collection(session=session, collection_id=matter.id)
    session.commit()
    session.expire_all()
    assert session.get(Document, lease.id) is not None
    assert collections.collections_of(session=session, document_id=lease.id) == []
    assert _count(session, CollectionAnswer) == 0
    assert _count(session, Job) == 0  # the question's job held the question
    assert not collections.delete_collection(session=session, collection_id=matter.id)


def test_deleting_a_document_takes_it_out_of_collections_and_their_answers(
    session: Session, tmp_path: Path
) -> None:
    lease = store(session, "Office Lease", [FILLER])
    supply = store(session, "Supply Agreement", [FILLER])
    matter = collections.create_collection(session=session, name="Matter")
    collections.add_documents(
        session=session, collection_id=matter.id, document_ids=[lease.id, supply.id]
    )
    _answer(session, matter.id, [lease.id])  # quotes the lease
    _answer(session, matter.id, [supply.id])
    session.commit()
    documents.delete_document(session=session, document_id=lease.id, files_dir=tmp_path)
    session.commit()
    session.expire_all()
    assert collections.document_ids_of(session=session, collection_id=matter.id) == [supply.id]
    remaining = session.scalars(select(CollectionAnswer)).all()
    assert [answer.document_ids for answer in remaining] == [[supply.id]]
    assert collections.get_collection(session=session, collection_id=matter.id) is not None
