"""Answers to questions across a collection: created by its question job, saved at most once
per job (a redelivered task finds the first delivery's row). Functions flush; the caller
commits. The question is private like the documents (see app.db.models.CollectionAnswer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import CollectionAnswer, Job, JobKind, SupportStatus
from app.services import jobs
from app.services.questions import typed_question
from app.settings import MAX_QUESTION_CHARS

MODES = ("retrieval", "per_document")


def question_params(
    *,
    collection_id: int,
    question: str,
    each: bool | None = None,
    max_chars: int = MAX_QUESTION_CHARS,
) -> dict[str, Any]:
    """The params of an answer job about the collection (create_question_job), the question
    checked first (app.services.questions.typed_question: InvalidQuestion)."""
    clean = typed_question(question, max_chars=max_chars)
    params: dict[str, Any] = {"question": clean, "collection_id": collection_id}
    if each is not None:
        params["each"] = each
    return params


def create_question_job(
    *,
    session: Session,
    collection_id: int,
    question: str,
    each: bool | None = None,
    max_chars: int = MAX_QUESTION_CHARS,
) -> Job:
    """A queued answer job about the collection (no document). `each`: True answers every
    document in a table, False from the best passages, None lets the question decide. The
    question is checked first (app.services.questions.typed_question: InvalidQuestion)."""
    params = question_params(
        collection_id=collection_id, question=question, each=each, max_chars=max_chars
    )
    job = jobs.create_job(session=session, kind=JobKind.ANSWER, params=params)
    job.collection_id = collection_id
    session.flush()
    return job


def get_for_job(*, session: Session, job_id: int) -> CollectionAnswer | None:
    return session.scalars(
        select(CollectionAnswer).where(CollectionAnswer.job_id == job_id)
    ).first()


def question_jobs(*, session: Session, collection_id: int) -> list[Job]:
    query = select(Job).where(Job.collection_id == collection_id).order_by(Job.id)
    return list(session.scalars(query))


def list_for_collection(
    *, session: Session, collection_id: int, limit: int = 20
) -> list[CollectionAnswer]:
    query = (
        select(CollectionAnswer)
        .where(CollectionAnswer.collection_id == collection_id)
        .order_by(CollectionAnswer.id.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


def save(
    *,
    session: Session,
    job_id: int,
    collection_id: int,
    question: str,
    mode: str,
    answer: str,
    citations: Sequence[dict[str, Any]],
    quotes: Sequence[dict[str, Any]],
    rows: Sequence[dict[str, Any]],
    support: str | None,
    model: str,
    stats: dict[str, Any] | None = None,
) -> CollectionAnswer:
    """The job's answer: stored now, or the one an earlier delivery of the job stored."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    existing = get_for_job(session=session, job_id=job_id)
    if existing is not None:
        return existing
    cited = {int(c["document_id"]) for c in citations}
    cited |= {int(q["document_id"]) for q in quotes}
    cited |= {int(r["document_id"]) for r in rows}
    saved = CollectionAnswer(
        job_id=job_id,
        collection_id=collection_id,
        question=question,
        mode=mode,
        answer=answer,
        citations=list(citations),
        quotes=list(quotes),
        rows=list(rows),
        document_ids=sorted(cited),
        support=SupportStatus(support) if support else None,
        model=model,
        stats=dict(stats or {}),
    )
    session.add(saved)
    session.flush()
    return saved
