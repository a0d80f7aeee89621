from pipelines.retrieval.bm25 import PassageIndex, terms, top_passages
from tests.pipelines.echo_model import make_document

PAGES = [
    "This Agreement is made between Acme Corp and Beta LLC.",
    "Payment of each invoice is due within thirty days of receipt.",
    "Either party may terminate this Agreement on ninety days written notice.",
    "This Agreement is governed by the laws of the State of Delaware.",
]


def test_terms_drop_stopwords_and_match_word_forms() -> None:
    assert terms("The termination of the Agreement") == terms("terminations agreement")
    assert terms("governs") == terms("governing") == terms("governed")
    assert terms("the of and") == []


def test_bm25_picks_the_passage_with_the_answer() -> None:
    document = make_document(PAGES, max_tokens=12)
    index = PassageIndex(document.passages)
    [best] = index.rank("When is payment due?", k=1)
    assert best[0].first_page == 2 and best[1] > 0
    assert top_passages(document.passages, "Which law governs?", 1)[0].first_page == 4
    assert top_passages(document.passages, "How can it be terminated?", 1)[0].first_page == 3


def test_ranking_is_deterministic_and_ties_keep_document_order() -> None:
    document = make_document(PAGES, max_tokens=12)
    index = PassageIndex(document.passages)
    ranked = index.rank("unrelated words zebra")
    assert [p.ordinal for p, _ in ranked] == [p.ordinal for p in document.passages]
    assert all(score == 0 for _, score in ranked)
    assert index.rank("agreement") == PassageIndex(document.passages).rank("agreement")


def test_index_over_stopword_only_or_no_passages() -> None:
    assert PassageIndex([]).rank("payment") == []
    document = make_document(["The of and it."])
    assert [score for _, score in PassageIndex(document.passages).rank("payment")] == [0.0]
