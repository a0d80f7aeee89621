import pytest

from pipelines.answer.question import answer_question
from pipelines.citations import citation_line, parse_citations
from pipelines.errors import ContextTooSmallError
from pipelines.prompts.templates import TASK_SEPARATOR, document_block, render_pages
from pipelines.retrieval.bm25 import PassageIndex
from tests.pipelines.echo_model import EchoModel, filler_page, make_document

CONTRACT_PAGES = [
    "This Agreement is made between Acme Corp and Beta LLC. It starts on 1 May 2024.",
    "Payment of each invoice is due within thirty days of receipt.",
    "Either party may terminate this Agreement on ninety days written notice.",
    "This Agreement is governed by the laws of the State of Delaware.",
]


@pytest.fixture
def contract():
    return make_document(CONTRACT_PAGES, kind="legal", max_tokens=14)


def test_full_document_answer_cites_pages_and_keeps_passages_on_them(contract) -> None:
    model = EchoModel(max_context_tokens=4096)
    result = answer_question(contract, "When is payment due?", model, max_new_tokens=100)
    assert result.method == "full_document"
    assert result.citation_source == "model"
    # The echo model cites every page it saw; all of them exist, but page 4 holds none of the
    # quotes its answer rests on: that citation is dropped.
    assert result.cited_pages == [1, 2, 3] and "[p. 4]" not in result.text
    assert result.stats["num_invalid_citations"] == 1
    on_cited = [p.ordinal for p in contract.passages if p.first_page in result.cited_pages]
    assert set(result.used_passage_ordinals) <= set(on_cited)
    block = document_block(contract.title, render_pages(contract.pages))
    assert model.prompts[0][-1]["content"].startswith(block)


def test_a_second_question_reuses_the_document_prefix(contract) -> None:
    model = EchoModel(max_context_tokens=4096)
    first = answer_question(contract, "When is payment due?", model, max_new_tokens=100)
    second = answer_question(contract, "Which law governs?", model, max_new_tokens=100)
    document_tokens = len(render_pages(contract.pages).split())
    assert first.stats["num_cached_tokens"] == 0
    assert second.stats["num_cached_tokens"] > document_tokens
    # Only the task (its quotes and the question) and the template's closing tokens are
    # computed again.
    task = model.prompts[1][-1]["content"].split(TASK_SEPARATOR, 1)[1]
    assert second.stats["num_computed_prompt_tokens"] <= len(task.split()) + 2


def test_uncited_answer_gets_pages_of_the_best_matching_passages(contract) -> None:
    model = EchoModel(max_context_tokens=4096, cite=False, extra_text=" Delaware law.")
    result = answer_question(contract, "Which state's law governs?", model, max_new_tokens=100)
    # The pages of the quotes the checked answer rests on: the governing-law clause's.
    assert result.citation_source == "checked"
    assert result.cited_pages == [4]
    assert result.text.endswith("\n\n" + citation_line(result.cited_pages))
    assert parse_citations(result.text) == result.cited_pages
    used_pages = {
        p.first_page for p in contract.passages if p.ordinal in result.used_passage_ordinals
    }
    assert used_pages <= set(result.cited_pages)


def test_citations_of_pages_that_do_not_exist_are_dropped(contract) -> None:
    model = EchoModel(max_context_tokens=4096, extra_text=" See also [p. 99].")
    result = answer_question(contract, "When is payment due?", model, max_new_tokens=100)
    assert 99 not in result.cited_pages and "[p. 99]" not in result.text
    assert result.stats["num_invalid_citations"] >= 1


def test_long_document_is_answered_from_retrieved_passages() -> None:
    pages = [filler_page(n) for n in range(1, 21)]
    pages[13] += "\n\nThe termination fee is 5,000 dollars payable by the licensee."
    document = make_document(pages, kind="legal", max_tokens=40)
    model = EchoModel(max_context_tokens=300)
    result = answer_question(
        document, "What is the termination fee?", model, max_new_tokens=60, num_passages=3
    )
    assert result.method == "retrieval"
    prompt = model.prompts[0][-1]["content"]
    assert "The termination fee is 5,000 dollars" in prompt
    assert "[p. 14]" in prompt
    assert 14 in result.cited_pages
    assert 1 <= len(result.used_passage_ordinals) <= 3
    given = [p for p in document.passages if p.ordinal in result.used_passage_ordinals]
    given_pages = {page for p in given for page in range(p.first_page, p.last_page + 1)}
    assert set(result.cited_pages) <= given_pages
    assert result.stats["num_passages_in_prompt"] == len(given)


def test_retrieval_without_model_citations_cites_what_it_was_given() -> None:
    pages = [filler_page(n) for n in range(1, 21)]
    document = make_document(pages, max_tokens=40)
    index = PassageIndex(document.passages)
    model = EchoModel(max_context_tokens=300, cite=False)
    result = answer_question(
        document, "What about topic7x2?", model, max_new_tokens=60, num_passages=2, index=index
    )
    assert result.method == "retrieval"
    assert result.citation_source in {"matched", "prompt", "checked"}
    assert result.cited_pages and set(result.cited_pages) <= {7}
    assert "Sources: [p. 7]" in result.text


def test_a_context_too_small_for_one_passage_is_a_clear_error(contract) -> None:
    with pytest.raises(ContextTooSmallError, match="cannot hold even one passage"):
        answer_question(contract, "When is payment due?", EchoModel(max_context_tokens=90))


def test_an_empty_question_is_refused(contract) -> None:
    with pytest.raises(ValueError, match="empty"):
        answer_question(contract, "  ", EchoModel())
