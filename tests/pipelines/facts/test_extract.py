"""Key facts from generated documents with known facts on known pages, read by a scripted
model that answers right, wrong or with an invented value: what is kept, what is replaced by a
rule, what is left empty."""

from __future__ import annotations

import pytest

from pipelines.documents import document_text
from pipelines.facts.extract import extract_facts
from pipelines.facts.fields import schema_for
from pipelines.facts.prompts import ANSWER_SCHEMA
from pipelines.facts.reading import answer_from_reply
from pipelines.ingest.classify import guess_subkind
from tests.pipelines.facts_documents import (
    CONTRACT_FACTS,
    CONTRACT_PAGES,
    OPINION_FACTS,
    OPINION_PAGES,
    ScriptedModel,
    pdf_document,
    text_document,
)

GOVERNING_LAW = "Which state's or country's law governs this agreement?"
PARTIES = "Who are the parties to this agreement?"
AGREEMENT_DATE = "On what date was this agreement made?"


def _by_field(result):
    return {fact.field: fact for fact in result.facts}


@pytest.fixture(scope="module")
def contract(tmp_path_factory):
    return pdf_document(tmp_path_factory.mktemp("contract"), CONTRACT_PAGES, name="supply.pdf")


@pytest.fixture(scope="module")
def opinion(tmp_path_factory):
    return pdf_document(tmp_path_factory.mktemp("opinion"), OPINION_PAGES, name="opinion.pdf")


def test_a_contracts_facts_come_with_their_quote_on_the_right_page(contract) -> None:
    model = ScriptedModel(
        {
            GOVERNING_LAW: "Oregon",
            PARTIES: "Quillfeather Instruments, Inc.; Marrowby Analytics LLC",
            AGREEMENT_DATE: "14th day of March, 2021",
        }
    )
    result = extract_facts(contract, model)

    assert result.subkind == "contract"
    facts = _by_field(result)
    assert list(facts) == [spec.name for spec in schema_for("contract")]
    text = document_text(contract.pages)
    for name, (normalized, page) in CONTRACT_FACTS.items():
        fact = facts[name]
        assert (fact.normalized, fact.page) == (normalized, page), name
        for quote in fact.evidence:  # verbatim: a reader finds it on the cited page
            assert text[quote.start_char : quote.end_char] == quote.text
    law = facts["governing_law"]
    assert law.source == "model" and "laws of the State of Oregon" in law.evidence[0].text
    assert law.confidence == max(f.confidence for f in result.facts)  # model and rule agree
    assert facts["parties"].source == "model" and facts["agreement_date"].source == "model"
    # At most one prompt per field (none where no sentence shares a query word, none for a
    # field the structure gives: the term and renewal clauses), each short: the field's
    # examples, then two quotes.
    questions = [p[-1]["content"].rsplit("Question: ", 1)[1] for p in model.prompts]
    from_structure = result.stats["num_from_structure"]
    assert from_structure == 2
    assert len(set(questions)) == len(questions) >= len(facts) - 2 - from_structure
    assert (facts["expiration_date"].origin, facts["renewal_term"].origin) == (
        "clause 3, p. 2",
        "clause 4, p. 2",
    )
    assert all(len(p[-1]["content"]) < 1_500 for p in model.prompts)
    assert result.stats["num_found"] == sum(f.is_found for f in result.facts)


@pytest.mark.parametrize(
    "invented",
    ["Federal Law 111-12-14 of 2013", "the Republic of Zubrowka", "New York", "Delaware"],
)
def test_an_invented_or_unquoted_jurisdiction_is_rejected(contract, invented) -> None:
    # "Delaware" is in the document, but as a party's state of incorporation, not its law.
    result = extract_facts(contract, ScriptedModel({GOVERNING_LAW: invented}))
    law = _by_field(result)["governing_law"]
    assert (law.value, law.source, law.page) == ("Oregon", "rule", 3)
    assert law.confidence < 0.7


def test_with_no_governing_law_clause_the_value_stays_empty(contract) -> None:
    pages = [page.text.replace("the State of Oregon", "[* * *]") for page in contract.pages]
    document = text_document(pages)
    result = extract_facts(document, ScriptedModel({GOVERNING_LAW: "Oregon"}))
    law = _by_field(result)["governing_law"]
    assert (law.value, law.normalized, law.source, law.confidence) == ("", "", "none", 0.0)


def test_a_wrong_date_and_unknown_parties_are_replaced_by_what_the_quote_says(contract) -> None:
    model = ScriptedModel({AGREEMENT_DATE: "3 May 2019", PARTIES: "Acme Corp.; Globex Corporation"})
    facts = _by_field(extract_facts(contract, model))
    assert (facts["agreement_date"].normalized, facts["agreement_date"].source) == (
        "2021-03-14",
        "rule",
    )
    parties = facts["parties"]
    assert parties.source == "rule"
    assert parties.value == "Quillfeather Instruments, Inc.; Marrowby Analytics LLC"


def test_a_yes_without_a_quote_that_says_so_is_not_taken(contract) -> None:
    question = next(s.question for s in schema_for("contract") if s.name == "non_compete")
    facts = _by_field(extract_facts(contract, ScriptedModel({question: "Yes"})))
    assert facts["non_compete"].source == "none"


def test_an_opinions_facts_come_from_its_caption_and_its_closing(opinion) -> None:
    result = extract_facts(opinion, ScriptedModel({"Which court issued this opinion?": "x"}))
    assert result.subkind == "opinion"
    facts = _by_field(result)
    for name, (normalized, page) in OPINION_FACTS.items():
        assert (facts[name].normalized, facts[name].page) == (normalized, page), name


def test_the_sub_kind_decides_the_schema(contract, opinion) -> None:
    assert guess_subkind("legal", contract.pages) == "contract"
    assert guess_subkind("legal", opinion.pages) == "opinion"
    label = [
        "INDICATIONS AND USAGE\nZorvatin is indicated for rhinitis.",
        "DOSAGE AND ADMINISTRATION",
    ]
    assert guess_subkind("medical", text_document(label, kind="medical").pages) == "label"
    other = text_document(["A note about the weather."], kind="other")
    result = extract_facts(other, ScriptedModel())
    assert (result.subkind, result.facts) == ("other", ())


def test_progress_is_reported_per_field(contract) -> None:
    seen = []
    extract_facts(contract, ScriptedModel(), on_progress=lambda done, total: seen.append(done))
    assert seen == list(range(1, len(schema_for("contract")) + 1))


def test_a_date_next_to_another_fields_words_is_not_the_agreement_date(contract) -> None:
    # "commence on the Effective Date and shall expire on March 31, 2026": a date, quoted, but
    # the expiration, not the date the agreement was made.
    model = ScriptedModel({AGREEMENT_DATE: "March 31, 2026"})
    date = _by_field(extract_facts(contract, model))["agreement_date"]
    assert (date.normalized, date.source) == ("2021-03-14", "rule")


@pytest.mark.parametrize(
    "answer",
    ["Quillfeather Instruments; Marrowby Analytics LLC", "Quillfeather; Marrowby"],
)
def test_short_forms_of_the_parties_read_as_their_full_names(contract, answer) -> None:
    parties = _by_field(extract_facts(contract, ScriptedModel({PARTIES: answer})))["parties"]
    assert (parties.value, parties.source) == (
        "Quillfeather Instruments, Inc.; Marrowby Analytics LLC",
        "model",
    )


def test_a_clause_cut_by_a_blank_line_is_still_read_and_quoted_whole(contract) -> None:
    pages = [page.text for page in contract.pages]
    pages[2] = pages[2].replace(
        "This Agreement shall be governed by and construed in accordance\nwith the laws",
        "THIS AGREEMENT SHALL BE GOVERNED BY AND CONSTRUED IN ACCORDANCE\n\nWITH THE LAWS",
    )
    law = _by_field(extract_facts(text_document(pages), ScriptedModel()))["governing_law"]
    assert (law.value, law.page) == ("Oregon", 3)
    assert [quote.text.split()[0] for quote in law.evidence] == ["THIS", "WITH"]


def test_the_disposition_is_what_the_last_ordering_sentence_orders(opinion) -> None:
    question = "What did the court decide: affirmed, reversed, remanded, vacated or dismissed?"
    pages = [page.text for page in opinion.pages]
    pages[2] = pages[2].replace(
        "The ordinance", "On remand the trial court heard the case again. The ordinance"
    )
    document = text_document(pages)
    wrong = _by_field(extract_facts(document, ScriptedModel({question: "remanded"})))
    right = _by_field(extract_facts(document, ScriptedModel({question: "Affirmed."})))
    assert (wrong["disposition"].value, wrong["disposition"].source) == ("affirmed", "rule")
    assert (right["disposition"].value, right["disposition"].source) == ("affirmed", "model")


def test_the_model_is_asked_for_json_and_a_json_or_plain_reply_is_read_alike(contract) -> None:
    """Every field's prompt asks for ANSWER_SCHEMA; a JSON reply gives its "answer", a plain
    one (a model that cannot follow a schema) is parsed as text, a JSON reply cut by the token
    limit gives the words it got to: the same facts from all three."""
    plain = ScriptedModel({GOVERNING_LAW: "Oregon", AGREEMENT_DATE: "14th day of March, 2021"})
    as_json = ScriptedModel(
        {
            GOVERNING_LAW: '{"answer": "Oregon"}',
            AGREEMENT_DATE: '{"answer": "14th day of March, 2021',
        }
    )
    by_plain, by_json = extract_facts(contract, plain), extract_facts(contract, as_json)

    assert as_json.schemas and all(schema == ANSWER_SCHEMA for schema in as_json.schemas)
    for name in ("governing_law", "agreement_date"):
        fact = _by_field(by_json)[name]
        assert fact.source == "model" and fact.normalized == _by_field(by_plain)[name].normalized
    assert _by_field(by_json)["governing_law"].value == "Oregon"
    assert (by_json.stats["num_json_replies"], by_plain.stats["num_json_replies"]) == (1, 0)


@pytest.mark.parametrize(
    ("reply", "read"),
    [
        ('{"answer": "Oregon"}', ("Oregon", True)),
        ('  {"answer" : "Not stated"}\n', ("Not stated", True)),
        ('{"answer": "the State of Or', ("the State of Or", False)),  # cut by the token limit
        ('{"value": "Oregon"}', ('{"value": "Oregon"}', False)),  # another shape: text parsing
        ('{"answer": 7}', ('{"answer": 7}', False)),
        ("Answer: Oregon.", ("Answer: Oregon.", False)),
    ],
)
def test_a_reply_is_read_as_json_of_the_schema_or_left_for_text_parsing(reply, read) -> None:
    assert answer_from_reply(reply) == read
