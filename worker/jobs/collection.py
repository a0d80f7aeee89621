"""The question job about a collection: re-read the job row, answer across the collection's
documents (pipelines.collection.answer) or document by document in a table
(pipelines.collection.table), and save the answer once.

An answer job with a collection_id is one of these (worker/jobs/answer.run_question sends it
here).
Safe to run again for the same job: a saved answer is found by job id. Progress: "retrieving",
then "reading documents" (done of total), then the model's prefill. Nothing here logs document
text, questions or answers.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Document, DocumentStatus, Job, JobKind, Passage
from app.display import typed_text
from app.services import collection_answers, collections, documents
from pipelines.collection.answer import CollectionResult, RankedPassage, answer_across
from pipelines.collection.questions import asks_every_document
from pipelines.collection.sources import SourceDocument, labels_for
from pipelines.collection.table import answer_each
from pipelines.protocols import Embedder
from pipelines.retrieval.hybrid import index_for
from worker.jobs import job_run
from worker.jobs.collection_retrieval import rank_collection
from worker.jobs.document_inputs import input_of_rows
from worker.jobs.job_run import ClaimedJob, ModelFactory, RunOutcome, Saved, ThrottledProgress
from worker.jobs.known_facts import facts_in
from worker.model.vector_store import from_rows

# A table cell is a sentence or two; a longer one holds the whole batch of decode steps back.
TABLE_MAX_NEW_TOKENS = 64
# A question about every document reads each one and makes a prompt for most: past this many
# documents the job is refused with a sentence rather than left to run for an hour on a CPU.
MAX_TABLE_DOCUMENTS = 200


def run_collection_answer(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    task_id: str | None = None,
    embedder: Embedder | None = None,
) -> RunOutcome:
    """Answer a collection's question: a table of one row per document when it asks about every
    document, else one answer from the best passages across them; saved once."""
    claimed = job_run.claim_job(
        job_id, JobKind.ANSWER, sessions, task_id, is_saved=collection_answers.get_for_job
    )
    if isinstance(claimed, RunOutcome):
        return claimed
    return answer_claimed(
        claimed,
        sessions=sessions,
        model_factory=model_factory,
        max_new_tokens=max_new_tokens,
        embedder=embedder,
    )


def answer_claimed(
    claimed: ClaimedJob,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    embedder: Embedder | None = None,
) -> RunOutcome:
    """run_collection_answer for a job this run has claimed (job_run.claim_job)."""
    job_id = claimed.job.id

    def compute(job: Job) -> _Asked:
        question = typed_text(str(job.params.get("question") or ""))  # as the services read it
        collection_id = job.collection_id
        if not question or collection_id is None:
            raise job_run.JobFailure("no_question", "This job holds no question.")
        each = job.params.get("each")
        is_table = asks_every_document(question) if each is None else bool(each)
        started = time.perf_counter()
        model = job_run.build_model(model_factory, sessions, job)
        progress = ThrottledProgress(sessions, job_id, "answering")
        if is_table:
            sources = _load_sources(sessions, job_id, collection_id, None, embedder, True)
            read_seconds = round(time.perf_counter() - started, 3)
            result = answer_each(
                question,
                list(sources.values()),
                model,
                max_new_tokens=min(max_new_tokens, TABLE_MAX_NEW_TOKENS),
                embedder=embedder,
                on_progress=progress,
            )
        else:
            job_run.record_progress(sessions, job_id, "retrieving", 0, 0)
            with sessions() as session:
                ranked_ids, counts = rank_collection(
                    session, collection_id=collection_id, question=question, embedder=embedder
                )
            wanted = list(dict.fromkeys(r.document_id for r in ranked_ids))
            sources = _load_sources(sessions, job_id, collection_id, wanted, embedder, False)
            read_seconds = round(time.perf_counter() - started, 3)
            result = answer_across(
                question,
                _ranked(ranked_ids, sources, sessions),
                sources,
                model,
                max_new_tokens=max_new_tokens,
                embedder=embedder,
                on_progress=progress,
            )
            result.stats.update(counts)
        seconds = round(time.perf_counter() - started, 3)
        # Retrieval and reading the documents, before the model's call.
        result.stats["read_seconds"] = read_seconds
        return _Asked(collection_id, question, result, model.name, seconds, len(sources))

    def save(session: Session, done: _Asked) -> Saved:
        return _save(session, job_id, done)

    return job_run.run_claimed(claimed, "collection question", sessions, compute=compute, save=save)


@dataclass(frozen=True)
class _Asked:
    collection_id: int
    question: str
    result: CollectionResult
    model_name: str
    seconds: float
    num_documents: int


def _load_sources(sessions, job_id, collection_id, wanted, embedder, with_facts):
    """The collection's ready documents (only `wanted`, in that order, when given) as
    SourceDocuments, each with its stored vectors and, for tables, its key facts."""
    with sessions() as session:
        members = collections.documents_of(session=session, collection_id=collection_id)
        ready = {d.id: d for d in members if d.status == DocumentStatus.READY}
        if not ready:
            raise job_run.JobFailure(
                "empty_collection", "This collection holds no ready document to ask."
            )
        order = [i for i in (wanted if wanted is not None else ready) if i in ready]
        if with_facts and len(order) > MAX_TABLE_DOCUMENTS:
            raise job_run.JobFailure(
                "too_many_documents",
                f"A question about every document takes at most {MAX_TABLE_DOCUMENTS} documents; "
                f"this collection has {len(order)}. Ask it from the best passages instead "
                "(`--retrieve`), or split the collection.",
            )
        labels = labels_for([(i, ready[i].title, ready[i].file_name) for i in order])
        sources: dict[int, SourceDocument] = {}
        for done, document_id in enumerate(order):
            job_run.record_progress(sessions, job_id, "reading documents", done, len(order))
            sources[document_id] = _source(
                session, ready[document_id], labels[document_id], embedder, with_facts
            )
        return sources


def _source(session: Session, document: Document, label: str, embedder, with_facts: bool):
    pages = documents.get_pages(session=session, document_id=document.id)
    rows = documents.get_passages(session=session, document_id=document.id)
    vectors = None if embedder is None else from_rows(rows, embedder.name, embedder.dimension)
    data = input_of_rows(document, pages, rows, vectors)
    facts = facts_in(session, document.id) if with_facts else ()
    return SourceDocument(document.id, label, data, index=index_for(data, embedder), facts=facts)


def _ranked(ranked_ids, sources, sessions) -> list[RankedPassage]:
    """The ranked passage ids as the loaded documents' passages."""
    with sessions() as session:
        ids = [r.passage_id for r in ranked_ids]
        query = select(Passage.id, Passage.ordinal).where(Passage.id.in_(ids))
        ordinals = {row.id: row.ordinal for row in session.execute(query)}
    ranked = []
    for r in ranked_ids:
        source = sources.get(r.document_id)
        ordinal = ordinals.get(r.passage_id)
        if source is None or ordinal is None:
            continue
        by_ordinal = {p.ordinal: p for p in source.document.passages}
        if ordinal in by_ordinal:
            ranked.append(RankedPassage(r.document_id, by_ordinal[ordinal], r.score))
    return ranked


def _save(session: Session, job_id: int, done: _Asked) -> Saved:
    result = done.result
    stats: dict[str, Any] = {**result.stats, "seconds": done.seconds, "mode": result.mode}
    stats.pop("calls", None)
    collection_answers.save(
        session=session,
        job_id=job_id,
        collection_id=done.collection_id,
        question=done.question,
        mode=result.mode,
        answer=result.text,
        citations=[_titled(dataclasses.asdict(c)) for c in result.citations],
        quotes=[
            {"document_id": q.document_id, "title": q.label, **dataclasses.asdict(q.evidence)}
            for q in result.quotes
        ],
        rows=[_titled(dataclasses.asdict(row)) for row in result.rows],
        support=result.support,
        model=done.model_name,
        # The model's own text where quotes stand in for it, set apart wherever the answer is
        # shown (app.services.answer_labels.view_of); with the answer only, not the job's stats.
        stats={**stats, "model_answer": result.model_text} if result.model_text else stats,
    )
    return Saved(
        stats,
        f"collection={done.collection_id} mode={result.mode} documents={done.num_documents} "
        f"seconds={done.seconds:.1f}",
    )


def _titled(row: dict[str, Any]) -> dict[str, Any]:
    """The pipelines' "label" (the document's name in citations) stored as "title"."""
    return {("title" if key == "label" else key): value for key, value in row.items()}
