"""Every sentence of a summary is checked against the document (pipelines.summary.support): its
quotes and page, an invented name or place marks it unsupported, a sentence with nothing in the
document to rest on has no evidence; summarize() returns the checked sentences with its text."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipelines.inputs import DocumentInput
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.summary.summarize import summarize
from pipelines.summary.support import (
    NO_EVIDENCE,
    SUPPORTED,
    UNSUPPORTED,
    check_summary,
    counts,
    summary_sentences,
)
from tests.pipelines.contract_pdf import contract_document
from tests.pipelines.echo_model import EchoModel


@pytest.fixture
def contract(tmp_path) -> DocumentInput:
    return contract_document(tmp_path, num_pages=4, law_page=3)


def _check(document: DocumentInput, text: str, embedder=None):
    sentences = DocumentSentences(document.pages)
    return check_summary(text, sentences, document.passages, embedder=embedder)


def test_a_sentence_the_document_states_is_supported_with_its_quote_and_page(contract) -> None:
    (checked,) = _check(contract, "The agreement is governed by the laws of the State of Vermont.")
    assert checked.status == SUPPORTED and checked.page == 3
    assert "State of Vermont" in checked.quotes[0].text
    assert not checked.missing


def test_an_invented_place_or_party_makes_the_sentence_unsupported(contract) -> None:
    text = (
        "The agreement is governed by the laws of the State of Oregon. "
        "It was signed between Quillfeather Mills LLC and Harrowgate Tools Inc."
    )
    law, parties = _check(contract, text)
    assert law.status == UNSUPPORTED and any("Oregon" in claim for claim in law.missing)
    assert parties.status == UNSUPPORTED and any("Harrowgate" in c for c in parties.missing)


def test_a_sentence_with_nothing_to_rest_on_has_no_evidence(contract) -> None:
    (checked,) = _check(contract, "Penguins migrate across the frozen tundra every winter.")
    assert checked.status == NO_EVIDENCE and not checked.missing


def test_words_about_the_document_itself_do_not_count_as_its_content(contract) -> None:
    # "This document covers ..." shares "document" and "covers" with nothing; the content words
    # (delivery, care) decide.
    (checked,) = _check(
        contract, "This document covers how the supplier handles delivery with care."
    )
    assert checked.status == SUPPORTED


def test_the_sentences_of_a_summary_lose_section_labels_and_fragments() -> None:
    text = "Summary:\nPages 2-3: The buyer may review the audit work.\nPages 4: The end."
    assert summary_sentences(text) == ["The buyer may review the audit work."]


def test_summarize_returns_every_sentence_checked_and_counts_them(contract) -> None:
    result = summarize(contract, EchoModel(), max_new_tokens=64)
    assert result.sentence_support
    assert [c.text for c in result.sentence_support] == summary_sentences(result.text)
    # The echo model writes the document's own first sentence: it is supported, on page 1.
    assert result.sentence_support[0].status == SUPPORTED
    assert result.sentence_support[0].page == 1
    assert result.stats["num_summary_sentences"] == len(result.sentence_support)
    assert counts(result.sentence_support)["num_supported_sentences"] >= 1


@dataclass
class Writes(EchoModel):
    """A model that writes `text`, whatever it is asked."""

    text: str = ""

    def _answer(self, content: str) -> str:
        return self.text


@pytest.mark.parametrize(
    "echo",
    [
        "This is one part of a longer contract.",
        # "briefly" and "summarize" in the instructions, "brief" and "summary" here.
        "Cover the text with a brief summary of the contract's payment terms.",
    ],
)
def test_a_sentence_that_repeats_the_instructions_is_left_out_not_checked(contract, echo) -> None:
    true = "The supplier handles delivery with care."
    result = summarize(contract, Writes(text=f"{echo} {true}"), max_new_tokens=64)

    assert [c.text for c in result.sentence_support] == [true]
    assert result.sentence_support[0].status == SUPPORTED
    assert result.text == true and result.stats["num_prompt_sentences_dropped"] == 1


def test_headings_names_and_form_lines_are_no_sentences() -> None:
    text = (
        "MORGAN STANLEY INVESTMENT MANAGEMENT INC.\nA Delaware corporation\nBy:\nName:\n"
        "[Signature Page to Trademark License Agreement]\n"
        "- Either party may terminate on notice [p. 4]\n"
        "The agreement is governed by New York law [p. 5].\n"
        "THIS AGREEMENT SHALL BE GOVERNED BY THE LAWS OF THE STATE OF NEW YORK."
    )
    assert summary_sentences(text) == [
        "Either party may terminate on notice",  # a bullet: five plain words, no full stop
        "The agreement is governed by New York law.",  # the citation gone, the stop kept
        "THIS AGREEMENT SHALL BE GOVERNED BY THE LAWS OF THE STATE OF NEW YORK.",
    ]


def test_a_sentence_said_again_or_a_third_copy_of_a_phrase_is_left_out() -> None:
    text = (
        "The supplier delivers the goods each month. The buyer pays within thirty days. "
        "the supplier delivers the goods each month.\n"
        "The buyer pays within thirty days of delivery. The buyer pays within thirty days, "
        "always."
    )
    assert summary_sentences(text) == [
        "The supplier delivers the goods each month.",
        "The buyer pays within thirty days.",
        "The buyer pays within thirty days of delivery.",
    ]
