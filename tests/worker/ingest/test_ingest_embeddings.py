"""Passage vectors through the real ingest path, on first use in an answer job, and `longdoc embed`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from app.db.models import Answer, Job, JobKind
from app.services import documents, jobs
from tests.pipelines import pdf_factory
from tests.pipelines.echo_model import EchoModel
from tests.worker.paraphrased_contract import CONTRACT_PAGES, QUESTION
from worker.ingest.store import STORED, IngestOptions
from worker.jobs import answer as answer_run
from worker.jobs import job_run
from worker.jobs.ingest import ingest_file
from worker.model.vector_store import ensure_vectors, from_rows

pytestmark = pytest.mark.slow


@pytest.fixture
def options(tmp_path: Path) -> IngestOptions:
    return IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=32, kind="legal")


def _ingest(sessions, options, count_tokens, tmp_path, embedder=None, stages=None) -> int:
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="supply.pdf")
    outcome = ingest_file(
        path,
        sessions=sessions,
        options=options,
        count_tokens=count_tokens,
        embedder=embedder,
        on_stage=None if stages is None else stages.append,
    )
    assert outcome.status == STORED, outcome.reason
    return outcome.document_id


def test_ingest_stores_each_passages_sentence_vectors(
    sessions, options, count_tokens, embedder, tmp_path
) -> None:
    stages: list[str] = []
    document_id = _ingest(sessions, options, count_tokens, tmp_path, embedder, stages)

    assert stages == ["hashing", "parsing", "splitting", "embedding", "storing"]
    with sessions() as session:
        rows = documents.get_passages(session=session, document_id=document_id)
        assert len(rows) > 2
        assert {row.embedding_model for row in rows} == {"all-MiniLM-L6-v2"}
        assert all(len(row.embedding) % (384 * 2) == 0 for row in rows)
        vectors = from_rows(rows, embedder.name, embedder.dimension)
        assert vectors.num_passages == len(rows)
        np.testing.assert_allclose(np.linalg.norm(vectors.vectors, axis=1), 1.0, atol=2e-3)
        job = session.scalars(
            select(Job).where(Job.document_id == document_id, Job.kind == JobKind.INGEST)
        ).one()
        assert job.stats["embedding_model"] == "all-MiniLM-L6-v2"
        assert documents.documents_missing_embeddings(session=session, model=embedder.name) == []
    # Stored vectors are read back, not computed again.
    counted: list[int] = []
    assert ensure_vectors(sessions, document_id, embedder, on_embedding=counted.append)
    assert counted == []


def test_an_old_document_gets_vectors_on_its_first_question_and_retrieval_turns_hybrid(
    sessions, options, count_tokens, embedder, tmp_path
) -> None:
    document_id = _ingest(sessions, options, count_tokens, tmp_path, embedder=None)
    with sessions() as session:
        rows = documents.get_passages(session=session, document_id=document_id)
        assert all(row.embedding is None for row in rows)
        assert documents.documents_missing_embeddings(session=session, model=embedder.name) == [
            document_id
        ]
        (disputes,) = [row.id for row in rows if "Pennsylvania" in row.text]

    def ask(embedder_or_none) -> Answer:
        job_id, outcome = _answer(sessions, document_id, embedder_or_none)
        assert outcome.status == job_run.SUCCEEDED
        with sessions() as session:
            answer = session.scalars(select(Answer).where(Answer.job_id == job_id)).one()
            assert answer.stats["num_passages_in_prompt"] is not None
            return answer

    assert disputes not in ask(None).cited_passage_ids  # BM25 alone never sees the clause
    ask(embedder)  # the first question with the embedder stores the vectors
    # Quotes now share the small prompt with the passages, so the clause's passage is checked
    # where retrieval decides: the hybrid ranking of the stored vectors puts it in the top three.
    with sessions() as session:
        rows = documents.get_passages(session=session, document_id=document_id)
        vectors = from_rows(rows, embedder.name, embedder.dimension)
    ranked_ids = _hybrid_ranked_ids(rows, vectors, embedder)
    assert disputes in ranked_ids  # among the passages the prompt takes first
    with sessions() as session:
        assert documents.documents_missing_embeddings(session=session, model=embedder.name) == []
        rows = documents.get_passages(session=session, document_id=document_id)
        assert from_rows(rows, embedder.name, embedder.dimension) is not None


def _answer(sessions, document_id: int, embedder) -> tuple[int, job_run.RunOutcome]:
    """QUESTION asked of the document through the answer job, with `embedder` (or None)."""
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.ANSWER,
            document_id=document_id,
            params={"question": QUESTION},
        )
        session.commit()
    # A context too small for the whole contract: the answer reads retrieved passages.
    outcome = answer_run.run_answer(
        job.id,
        sessions=sessions,
        model_factory=lambda: EchoModel(max_context_tokens=195),
        max_new_tokens=16,
        embedder=embedder,
    )
    return job.id, outcome


class _BrokenEmbedder:
    """An embedder whose model fails (as torch does when out of memory)."""

    name = "all-MiniLM-L6-v2"
    dimension = 384

    def embed(self, texts):
        raise RuntimeError("CUDA out of memory")


def test_a_failing_embedder_leaves_the_answer_to_bm25(
    sessions, options, count_tokens, tmp_path
) -> None:
    document_id = _ingest(sessions, options, count_tokens, tmp_path, embedder=None)
    _, outcome = _answer(sessions, document_id, _BrokenEmbedder())

    assert outcome.status == job_run.SUCCEEDED
    with sessions() as session:
        rows = documents.get_passages(session=session, document_id=document_id)
        assert all(row.embedding is None for row in rows)


def _hybrid_ranked_ids(rows, vectors, embedder) -> list[int]:
    from pipelines.documents import Passage as PassageData
    from pipelines.retrieval.hybrid import HybridIndex

    passages = [
        PassageData(
            r.ordinal, r.first_page, r.last_page, r.start_char, r.end_char, r.text, r.num_tokens
        )
        for r in rows
    ]
    by_ordinal = {r.ordinal: r.id for r in rows}
    ranked = HybridIndex(passages, vectors, embedder).rank(QUESTION, 3)
    return [by_ordinal[p.ordinal] for p, _ in ranked]
