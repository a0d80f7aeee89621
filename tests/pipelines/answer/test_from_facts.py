"""A question that a stored key fact answers gets the fact, its quotes and page, with no model
call (pipelines.answer.from_facts); others are left to the model."""

from __future__ import annotations

import pytest

from pipelines.answer.from_facts import KnownFact, fact_answer
from pipelines.answer.question import answer_question
from pipelines.inputs import DocumentInput
from pipelines.retrieval.evidence import DocumentSentences
from tests.pipelines.contract_pdf import contract_document
from tests.pipelines.echo_model import EchoModel, make_document


@pytest.fixture
def contract(tmp_path) -> DocumentInput:
    return contract_document(tmp_path, num_pages=4, law_page=3)


def _fact(document: DocumentInput, field: str, label: str, value: str, words: str) -> KnownFact:
    sentences = DocumentSentences(document.pages)
    flat = " ".join(sentences.text.split())
    assert words in flat
    for start, end in sentences.spans:
        if words in " ".join(sentences.text[start:end].split()):
            return KnownFact(field=field, label=label, value=value, spans=((start, end),))
    raise AssertionError(f"no sentence holds {words!r}")


def _facts(document: DocumentInput) -> list[KnownFact]:
    return [
        _fact(
            document, "governing_law", "Governing law", "Vermont", "laws of the State of Vermont"
        ),
        _fact(
            document,
            "parties",
            "Parties",
            "Quillfeather Mills LLC; Borrowdale Instruments Inc.",
            "between Quillfeather Mills LLC",
        ),
        _fact(
            document, "agreement_date", "Agreement date", "March 3, 2021", "made on March 3, 2021"
        ),
    ]


def test_a_question_the_governing_law_fact_answers_gets_it_without_the_model(contract) -> None:
    model = EchoModel()
    result = answer_question(
        contract,
        "Which state's law governs this agreement?",
        model,
        max_new_tokens=50,
        facts=_facts(contract),
    )
    assert model.prompts == []  # no model call
    assert result.method == "key_fact" and result.support == "supported"
    assert result.text == "Governing law: Vermont [p. 3]"
    assert result.cited_pages == [3] and "State of Vermont" in result.quotes[0].text
    assert result.stats["key_fact"] == "governing_law"


def test_parties_and_date_questions_get_their_facts(contract) -> None:
    facts = _facts(contract)
    parties = answer_question(
        contract,
        "Who are the parties to this agreement?",
        EchoModel(),
        max_new_tokens=50,
        facts=facts,
    )
    assert parties.text.startswith("Parties: Quillfeather Mills LLC; Borrowdale")
    dated = answer_question(
        contract,
        "On what date was this agreement made?",
        EchoModel(),
        max_new_tokens=50,
        facts=facts,
    )
    assert dated.text == "Agreement date: March 3, 2021 [p. 1]"


@pytest.mark.parametrize(
    "question",
    [
        "When can the agreement be terminated?",  # no kind asked: the model answers
        "What state is the buyer incorporated in?",  # a place, but not the governing law
        "Who pays for the audit?",  # names, but not the parties question
    ],
)
def test_questions_no_fact_answers_go_to_the_model(contract, question) -> None:
    model = EchoModel()
    result = answer_question(contract, question, model, max_new_tokens=50, facts=_facts(contract))
    assert result.method != "key_fact" and len(model.prompts) == 1


def test_a_fact_without_a_value_or_quotes_answers_nothing(contract) -> None:
    sentences = DocumentSentences(contract.pages)
    empty = KnownFact(field="governing_law", label="Governing law", value="", spans=((0, 10),))
    unquoted = KnownFact(field="governing_law", label="Governing law", value="Vermont", spans=())
    question = "Which state's law governs this agreement?"
    for fact in (empty, unquoted):
        assert fact_answer(question, [fact], sentences, contract.passages) is None


# The facts job searched for the field and found no valid value.
MISSING_LAW = KnownFact(field="governing_law", label="Governing law", value="", missing=True)


def test_a_field_not_found_by_the_facts_job_is_answered_by_a_quote_that_states_it(contract) -> None:
    # The facts job found no valid value, yet the closest quote is the governing-law clause:
    # "not found" is only for when nothing that answers was found, so that quote is the answer
    # (issue 21: "No answer found" with the clause quoted right below it).
    model = EchoModel()
    result = answer_question(
        contract, "Which state's law governs this agreement?", model, max_new_tokens=50,
        facts=[MISSING_LAW],
    )  # fmt: skip
    assert model.prompts == []
    assert result.method == "key_fact" and result.support == "supported"
    assert result.text.endswith("(quoted from p. 3)") and "State of Vermont" in result.text
    assert result.cited_pages == [3] and result.stats["key_fact_missing"] is True


def test_a_field_searched_and_not_found_answers_so_with_the_closest_quotes() -> None:
    # The clause is there but its jurisdiction is redacted: no quote states a place in the
    # governing-law role, so the answer is that none was found, with the closest sentences.
    contract = make_document(
        [
            "This Supply Agreement is made between Quillfeather Mills LLC and Borrowdale "
            "Instruments Inc.",
            "Each party keeps the insurance records for the period the law requires.",
            "This Agreement shall be governed by the laws of [redacted], without regard to its "
            "conflict of law rules.",
        ],
        kind="legal",
    )
    model = EchoModel()
    result = answer_question(
        contract, "Which state's law governs this agreement?", model, max_new_tokens=50,
        facts=[MISSING_LAW],
    )  # fmt: skip
    assert model.prompts == []
    assert result.method == "key_fact" and result.support == "no_answer"
    assert result.text.startswith("No governing law found: the key-facts search read")
    assert "quoted below" in result.text
    assert result.cited_pages == [] and result.quotes
    assert result.stats["key_fact_missing"] is True


def test_a_missing_fact_of_another_kind_leaves_the_question_to_the_model(contract) -> None:
    model = EchoModel()
    result = answer_question(
        contract, "On what date was this agreement made?", model, max_new_tokens=50,
        facts=[MISSING_LAW],
    )  # fmt: skip
    assert result.method != "key_fact" and len(model.prompts) == 1
