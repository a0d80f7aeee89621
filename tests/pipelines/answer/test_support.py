"""Checking an answer's dates, numbers, amounts, places and names against quotes and document."""

import pytest

from pipelines.answer.support import (
    DATE,
    IN_DOCUMENT,
    IN_QUOTES,
    JURISDICTION,
    MISSING,
    NAME,
    NUMBER,
    check_support,
    claims_of,
)
from pipelines.values.claims import find_dates, find_numbers
from pipelines.values.jurisdictions import canonical, find_jurisdictions

DOCUMENT = (
    "This Services Agreement is made on the 19th day of December, 2018 between Hale Village, "
    "LLC and Orbit NewEnergy, Inc. The fee is $7,500 per month, payable within thirty (30) "
    "days. Either party may end it on ninety days notice.\n\nThis Agreement shall be governed "
    "by the laws of the State of Ohio. The United States of America is not a party."
)
GOVERNING_LAW = "This Agreement shall be governed by the laws of the State of Ohio."


@pytest.mark.parametrize(
    "written",
    ["December 19, 2018", "19 December 2018", "Dec. 19th, 2018", "2018-12-19", "12/19/2018"],
)
def test_one_date_in_any_format_is_the_same_date(written: str) -> None:
    (span,) = find_dates(f"It was signed on {written}.")
    assert (2018, 12, 19) in span.values
    assert check_support(f"Signed on {written}.", [], DOCUMENT).is_supported


def test_numbers_in_words_digits_and_amounts_compare_by_value() -> None:
    values = {
        v for span in find_numbers("ninety days, $5 million, 2,500.00 and 15%") for v in span.values
    }
    assert values == {90, 5_000_000, 2500, 15}
    assert check_support("Notice is 90 days and payment 30 days.", [], DOCUMENT).is_supported
    check = check_support("The fee is $8,000 a month.", [], DOCUMENT)
    assert [(c.claim.kind, c.claim.text) for c in check.checks] == [(NUMBER, "$8,000")]
    assert [claim.text for claim in check.missing] == ["$8,000"]


def test_places_have_one_name_whatever_the_spelling() -> None:
    assert canonical("U.S.A.") == canonical("united states") == "United States"
    assert [m.key for m in find_jurisdictions("New York, West Virginia and us")] == [
        "New York",
        "West Virginia",
    ]
    assert check_support("The U.S. is named.", [], DOCUMENT).is_supported


def test_an_invented_jurisdiction_is_missing_and_a_quoted_one_is_in_the_quotes() -> None:
    invented = check_support("The laws of the State of Nevada govern.", [GOVERNING_LAW], DOCUMENT)
    assert not invented.is_supported
    assert [(c.kind, c.text) for c in invented.missing] == [(JURISDICTION, "Nevada")]
    quoted = check_support("Ohio law governs [p. 2].", [GOVERNING_LAW], DOCUMENT)
    assert [(c.claim.kind, c.found_in) for c in quoted.checks] == [(JURISDICTION, IN_QUOTES)]


def test_names_are_checked_word_by_word_and_found_in_the_document() -> None:
    check = check_support(
        "The parties are Hale Village, L.L.C. and Orbit NewEnergy Inc.", [GOVERNING_LAW], DOCUMENT
    )
    assert check.is_supported
    assert {(c.claim.kind, c.found_in) for c in check.checks} == {(NAME, IN_DOCUMENT)}
    assert all(c.document_offset is not None for c in check.checks)
    invented = check_support("The parties are John Smith and Hale Village.", [], DOCUMENT)
    assert [claim.text for claim in invented.missing] == ["John Smith"]


def test_citations_sentence_starts_and_the_sources_line_are_not_claims() -> None:
    answer = "Payment is due monthly [p. 4], see (pp. 5-6).\n\nSources: [p. 9]"
    assert claims_of(answer) == []


def test_a_made_up_statute_fails_on_its_name_and_numbers() -> None:
    check = check_support("It is the Federal Law 111-12-14 of 2013.", [GOVERNING_LAW], DOCUMENT)
    kinds = {claim.kind for claim in check.missing}
    assert kinds == {NAME, NUMBER}
    assert all(c.found_in == MISSING for c in check.checks if c.claim.kind == NUMBER)


def test_a_date_the_document_does_not_hold_is_missing() -> None:
    check = check_support("It was signed on January 5, 2019.", [], DOCUMENT)
    assert [(c.kind, c.text) for c in check.missing] == [(DATE, "January 5, 2019")]


def test_a_name_word_may_be_inflected_as_the_document_has_it_otherwise() -> None:
    check = check_support("Governing Law: Ohio.", [], DOCUMENT)  # the document: "governed by"
    assert check.is_supported and {c.claim.kind for c in check.checks} == {NAME, JURISDICTION}
