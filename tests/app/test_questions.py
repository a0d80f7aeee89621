"""Questions and searches as the services take them (app/services/questions.py): read as they
look, so a question of zero-width spaces is empty; held to the settings' lengths, with a
sentence naming the limit, whichever way they come in (issue 26, items 4 and 7)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Job
from app.embedding_models import query_window_end
from app.services import collection_answers, collections, documents, questions
from app.services.questions import InvalidQuestion
from app.services.search import search_passages
from app.settings import MAX_QUESTION_CHARS, MAX_SEARCH_CHARS, Settings
from tests.app.new_documents import new_document

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u200b"


def _num_jobs(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Job))


def test_a_question_of_invisible_characters_is_refused_with_a_sentence(session: Session) -> None:
    document = documents.store_document(session=session, new=new_document())
    assert ZERO_WIDTH.strip() == ZERO_WIDTH  # what let it through before
    for question in (ZERO_WIDTH, " \t\n", f"  {ZERO_WIDTH}\x07 "):
        with pytest.raises(InvalidQuestion, match="The question is empty") as refused:
            questions.create_answer_job(session=session, document_id=document.id, question=question)
        assert "visible" in str(refused.value)
    collection = collections.create_collection(session=session, name="Leases")
    with pytest.raises(InvalidQuestion, match="The question is empty"):
        collection_answers.create_question_job(
            session=session, collection_id=collection.id, question=ZERO_WIDTH
        )
    assert _num_jobs(session) == 0


def test_the_question_is_stored_as_it_reads(session: Session) -> None:
    document = documents.store_document(session=session, new=new_document())
    job = questions.create_answer_job(
        session=session,
        document_id=document.id,
        question="Which\u200b law\u2060 governs\uff1f\n",
    )
    assert job.params == {"question": "Which law governs?"} and job.document_id == document.id


def test_an_over_long_question_is_refused_naming_the_limit(session: Session) -> None:
    document = documents.store_document(session=session, new=new_document())
    collection = collections.create_collection(session=session, name="Leases")
    long_question = "Which law governs " * 200  # 3,600 characters
    with pytest.raises(InvalidQuestion, match="at most 2,000") as refused:
        questions.create_answer_job(
            session=session, document_id=document.id, question=long_question
        )
    assert "3,599 characters" in str(refused.value)  # counted as it reads (the end trimmed)
    with pytest.raises(InvalidQuestion, match="at most 100"):
        collection_answers.create_question_job(
            session=session, collection_id=collection.id, question=long_question, max_chars=100
        )
    started = time.perf_counter()
    with pytest.raises(InvalidQuestion, match="at most 2,000"):  # a megabyte: refused at once
        questions.create_answer_job(
            session=session, document_id=document.id, question="x" * 1_000_000
        )
    assert time.perf_counter() - started < 5  # only catches a character-by-character read
    assert _num_jobs(session) == 0
    # Exactly at the limit is taken.
    assert questions.create_answer_job(
        session=session, document_id=document.id, question="q" * MAX_QUESTION_CHARS
    )


def test_an_over_long_search_is_refused_naming_the_limit(session: Session) -> None:
    documents.store_document(session=session, new=new_document())
    words = " ".join(f"word{i}" for i in range(14_000))  # the probe's 14,000 distinct words
    with pytest.raises(InvalidQuestion, match=r"The search is too long.*at most 500"):
        search_passages(session=session, query=words)
    with pytest.raises(InvalidQuestion, match="at most 20"):
        search_passages(session=session, query="second page longer words", max_query_chars=20)
    assert search_passages(session=session, query="Second\u200b page") != []
    # A question job's retrieval: its question was held to the question's limit when asked.
    assert search_passages(session=session, query="page " * 200, max_query_chars=None) != []


def test_the_limits_are_settings_with_the_ui_s_defaults() -> None:
    settings = Settings(_env_file=None)
    assert (settings.max_question_chars, settings.max_search_chars) == (2000, 500)
    assert (MAX_QUESTION_CHARS, MAX_SEARCH_CHARS) == (2000, 500)
    assert Settings(_env_file=None, max_search_chars=80).max_search_chars == 80


def test_a_long_query_is_embedded_up_to_the_model_s_length() -> None:
    offsets = [(i * 5, i * 5 + 4) for i in range(1000)]  # 1,000 four-letter tokens
    assert query_window_end(offsets, 256) == offsets[253][1] == 1269
    assert query_window_end(offsets[:254], 256) is None  # fits: all of it
    assert query_window_end(offsets[:255], 256) == offsets[253][1]
    assert query_window_end([], 256) is None
    with pytest.raises(ValueError):
        query_window_end(offsets, 2)
