from pipelines.documents import PageText, document_text
from pipelines.ingest.split import split_into_passages
from pipelines.retrieval.bm25 import PassageIndex
from pipelines.retrieval.evidence import sentence_evidence


def _count(texts):
    return [len(text.split()) for text in texts]


def test_evidence_is_verbatim_and_on_its_page():
    pages = (
        PageText(1, "This Agreement is made between Acme Corp. and Beta LLC on the first day."),
        PageText(
            2,
            "Payment is due in thirty days.\n\nThis Agreement shall be governed by the laws of "
            "the State of Delaware, without regard to conflicts of law.",
        ),
    )
    passages = split_into_passages(pages, count_tokens=_count, max_tokens=12)
    ranked = PassageIndex(passages).rank("Which law governs this agreement?", 3)
    found = sentence_evidence(ranked, "Which law governs this agreement?", pages, k=2)
    assert found, "the governing-law sentence shares terms with the question"
    best = found[0]
    assert "Delaware" in best.text
    assert best.page == 2
    assert document_text(pages)[best.start_char : best.end_char] == best.text


def test_no_shared_terms_no_evidence():
    pages = (PageText(1, "The weather was pleasant throughout the whole afternoon."),)
    passages = split_into_passages(pages, count_tokens=_count, max_tokens=50)
    ranked = PassageIndex(passages).rank("indemnification cap", 3)
    assert sentence_evidence(ranked, "indemnification cap", pages) == []
