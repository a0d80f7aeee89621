"""Hybrid retrieval with the real embedder: a clause worded unlike the question is still found."""

from __future__ import annotations

import pytest

from pipelines.retrieval.bm25 import PassageIndex
from pipelines.retrieval.evidence import DocumentSentences, sentence_evidence
from pipelines.retrieval.hybrid import HybridIndex
from pipelines.vectors import PassageVectors
from tests.pipelines.echo_model import make_document
from tests.worker.paraphrased_contract import CONTRACT_PAGES, QUESTION
from worker.model.vector_store import embed_passages

pytestmark = pytest.mark.slow


def _disputes_ordinal(document) -> int:
    (ordinal,) = [p.ordinal for p in document.passages if "Pennsylvania" in p.text]
    return ordinal


@pytest.fixture(scope="module")
def document():
    return make_document(CONTRACT_PAGES, kind="legal", max_tokens=24)


def test_hybrid_finds_the_paraphrased_clause_bm25_misses(document, embedder) -> None:
    assert len(document.passages) >= 5
    target = _disputes_ordinal(document)
    bm25 = PassageIndex(document.passages).rank(QUESTION)
    assert [p.ordinal for p, score in bm25 if score > 0].count(target) == 0
    vectors = PassageVectors.from_groups(
        embed_passages(embedder, [p.text for p in document.passages])
    )

    hybrid = HybridIndex(document.passages, vectors, embedder).rank(QUESTION, 3)

    assert target in [p.ordinal for p, _ in hybrid]
    assert target not in [p.ordinal for p, _ in bm25[:3]]


def test_evidence_with_the_embedder_quotes_the_paraphrased_sentence(document, embedder) -> None:
    target = _disputes_ordinal(document)
    ranked = [(p, 1.0) for p in document.passages if p.ordinal in {target, 0, 1}]
    sentences = DocumentSentences(document.pages)

    lexical = sentence_evidence(ranked, QUESTION, sentences, k=3)
    semantic = sentence_evidence(ranked, QUESTION, sentences, k=3, embedder=embedder)

    assert all("Pennsylvania" not in e.text for e in lexical)
    # The preamble may come first: it says "Agreement", a term rare in this contract.
    (quoted,) = [e for e in semantic[:2] if "Commonwealth of Pennsylvania" in e.text]
    assert quoted.page == 2
    assert sentences.text[quoted.start_char : quoted.end_char] == quoted.text
