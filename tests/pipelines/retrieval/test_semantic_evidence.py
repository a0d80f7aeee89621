"""The term side of embedding-aware evidence: rare query terms weigh more (the model: tests/worker)."""

from pipelines.documents import PageText
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.retrieval.semantic_evidence import term_weights


def test_a_term_in_every_sentence_weighs_little_and_a_rare_one_much() -> None:
    pages = (
        PageText(
            1,
            "This Agreement starts in March. This Agreement covers deliveries. "
            "This Agreement is governed by the laws of Ohio. This Agreement ends in 2030.",
        ),
    )
    sentences = DocumentSentences(pages)
    assert len(sentences.spans) == 4
    counts = sentences.term_sentence_counts()
    assert counts["agreement"] == 4 and counts["govern"] == 1

    weights = term_weights(sentences, {"agreement", "govern", "absent"})

    assert weights["agreement"] < 0.2 < weights["govern"] < weights["absent"]
