"""Answers that quote their evidence, checked against it: generated contract PDFs with the
parties on page 1 and the governing-law clause on a known page, the echo model as the model."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipelines.answer.check import NO_ANSWER_TEXT, NOT_FOUND_TEXT, quoted_answer
from pipelines.answer.question import answer_question
from pipelines.documents import document_text, page_spans
from pipelines.inputs import DocumentInput
from tests.pipelines.contract_pdf import contract_document
from tests.pipelines.echo_model import EchoModel

QUESTION = "Which state's law governs this agreement?"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _assert_verbatim(document: DocumentInput, quotes) -> None:
    text = document_text(document.pages)
    bounds = {number: (start, end) for number, start, end in page_spans(document.pages)}
    for quote in quotes:
        assert text[quote.start_char : quote.end_char] == quote.text
        start, end = bounds[quote.page]
        assert start <= quote.start_char < end  # the page it starts on


@pytest.fixture
def contract(tmp_path) -> DocumentInput:
    return contract_document(tmp_path, num_pages=4, law_page=3)


def test_the_answer_quotes_the_governing_law_clause_and_its_page(contract) -> None:
    result = answer_question(contract, QUESTION, EchoModel(), max_new_tokens=200)

    assert result.method == "full_document"
    best = result.quotes[0]
    assert "laws of the State of Vermont" in _flat(best.text) and best.page == 3
    _assert_verbatim(contract, result.quotes)
    # The echo model answers with each page's first sentence, which names no state: the quote
    # that states the governing law in its clause is the answer, supported, and the model's
    # text is set apart with the reason.
    assert result.support == "supported" and result.model_text is not None
    assert result.stats["support"] == "supported" and result.text == quoted_answer(best)
    assert "does not answer the question" in result.stats["support_reason"]
    assert 3 in result.cited_pages


def test_the_model_reads_the_quotes_right_before_the_question(contract) -> None:
    model = EchoModel()
    result = answer_question(contract, QUESTION, model, max_new_tokens=200)
    task = model.prompts[0][-1]["content"].rsplit("---", 1)[1]
    quote_line = f'[p. 3] "{_flat(result.quotes[0].text)}"'
    assert quote_line in task and task.index(quote_line) < task.index("Question:")


def test_a_long_contract_is_answered_from_retrieved_quotes_on_the_clause_page(tmp_path) -> None:
    document = contract_document(tmp_path, num_pages=20, law_page=14)
    result = answer_question(
        document, QUESTION, EchoModel(max_context_tokens=400), max_new_tokens=60, num_passages=3
    )
    assert result.method == "retrieval"
    assert result.quotes[0].page == 14 and "State of Vermont" in _flat(result.quotes[0].text)
    assert 14 in result.cited_pages
    _assert_verbatim(document, result.quotes)


def test_an_invented_jurisdiction_is_unsupported_and_the_best_quote_answers(contract) -> None:
    model = EchoModel(extra_text=" The laws of Nevada govern it.")
    result = answer_question(contract, QUESTION, model, max_new_tokens=200)

    # The model's text is not supported; the quote that names the state in its clause answers.
    assert result.support == "supported"
    assert result.unsupported_claims == ["Nevada"]
    assert "“Nevada”" in result.stats["support_reason"]
    assert "Nevada" in result.model_text
    assert result.text == quoted_answer(result.quotes[0])
    assert result.text.endswith("(quoted from p. 3)") and "State of Vermont" in result.text
    assert (result.cited_pages, result.citation_source) == ([3], "quote")
    assert result.used_passage_ordinals == [result.quotes[0].passage_ordinal]


def test_an_invented_number_is_unsupported_too(contract) -> None:
    model = EchoModel(extra_text=" Notice must be given 45 days ahead.")
    result = answer_question(contract, QUESTION, model, max_new_tokens=200)
    assert result.support == "supported" and result.unsupported_claims == ["45"]
    assert result.model_text is not None and "45" in result.model_text
    assert "(quoted from p. 3)" in result.text


def test_a_name_only_the_document_holds_adds_its_sentence_to_the_quotes(contract) -> None:
    # The echo model repeats the first sentence of every page: page 1 names the parties, and
    # shares no word with this question, so it is not among the quotes retrieval found.
    result = answer_question(contract, "What rules govern?", EchoModel(), max_new_tokens=200)
    parties = [q for q in result.quotes if "Quillfeather Mills" in q.text]
    assert parties and parties[0].page == 1 and parties[0].score == 0.0
    _assert_verbatim(contract, result.quotes)


@dataclass
class LoopingModel(EchoModel):
    """Like a small greedy model caught in a loop from its first words."""

    def _answer(self, content: str) -> str:
        return "The rent of the premises is the rent of the premises and " * 12


@dataclass
class SilentModel(EchoModel):
    def _answer(self, content: str) -> str:
        return ""


def test_a_looping_answer_is_replaced_by_the_best_quote(contract) -> None:
    result = answer_question(contract, QUESTION, LoopingModel(), max_new_tokens=200)
    assert result.support == "supported" and result.model_text is not None
    assert result.text == quoted_answer(result.quotes[0])
    assert result.stats["answer_loop_cut"] is True


def test_nothing_usable_and_nothing_to_quote_says_so(contract) -> None:
    result = answer_question(contract, "Xylophones or zebras?", SilentModel(), max_new_tokens=20)
    assert (result.support, result.quotes, result.cited_pages) == ("no_answer", [], [])
    assert result.text == NO_ANSWER_TEXT


@dataclass
class FixedModel(EchoModel):
    answer: str = ""

    def _answer(self, content: str) -> str:
        return self.answer


def test_an_answer_made_of_the_prompts_own_words_is_no_answer(contract) -> None:
    echo = FixedModel(answer="The quotes from the document are used to answer the question.")
    result = answer_question(contract, QUESTION, echo, max_new_tokens=50)
    assert result.support == "supported" and result.text == quoted_answer(result.quotes[0])
    assert "repeats the question" in result.stats["support_reason"]


def test_an_answer_that_names_no_place_for_a_which_state_question_gives_the_quote(contract) -> None:
    vague = FixedModel(answer="The agreement is governed by the law of the state.")
    result = answer_question(contract, QUESTION, vague, max_new_tokens=50)
    assert result.support == "supported" and result.model_text == vague.answer
    assert result.text == quoted_answer(result.quotes[0])
    assert "State of Vermont" in result.text and result.cited_pages == [3]

    # "The document does not say" is wrong when a quote names the place.
    not_stated = FixedModel(answer="The document does not say.")
    result = answer_question(contract, QUESTION, not_stated, max_new_tokens=50)
    assert result.support == "supported" and "State of Vermont" in result.text


def test_an_answer_of_the_kind_asked_is_kept(contract) -> None:
    named = FixedModel(answer="The laws of the State of Vermont govern it [p. 3].")
    result = answer_question(contract, QUESTION, named, max_new_tokens=50)
    assert result.support == "supported" and result.text.startswith(named.answer)


def test_not_stated_for_an_open_question_is_no_answer_with_the_closest_quotes(contract) -> None:
    # "The document does not say" cannot be checked against quotes; no quote settles an open
    # question on its own: no answer found, and the closest quotes are listed to check.
    not_stated = FixedModel(answer="The document does not say.")
    question = "Which records does each party keep, and for how long?"
    result = answer_question(contract, question, not_stated, max_new_tokens=50)
    assert result.support == "no_answer" and result.text == NOT_FOUND_TEXT
    assert result.quotes and result.cited_pages == []
