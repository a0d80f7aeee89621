"""A legal document's title from its first page when its metadata names none."""

from __future__ import annotations

from pipelines.ingest.first_page_title import first_page_title


def test_an_opinions_caption_on_one_line_or_three() -> None:
    assert (
        first_page_title("UNITED STATES DISTRICT COURT\nACME CORP. v. BETA INC.\nOPINION")
        == "ACME CORP. v. BETA INC."
    )
    caption = (
        "IN THE UNITED STATES COURT OF APPEALS\nFOR THE NINTH CIRCUIT\n\n"
        "JANE ROE, Plaintiff-Appellant,\nv.\nCITY OF SPRINGFIELD, Defendant-Appellee.\n\n"
        "No. 21-1234\nOPINION\nThe district court dismissed the complaint."
    )
    assert first_page_title(caption) == "JANE ROE v. CITY OF SPRINGFIELD"
    two_line_roles = "JOHN DOE,\nPlaintiff,\nv.\nMEGA BANK N.A.,\nDefendant.\n"
    assert first_page_title(two_line_roles) == "JOHN DOE v. MEGA BANK N.A."


def test_a_contracts_title_line() -> None:
    page = (
        "Exhibit 10.1\n\nMASTER SERVICES AGREEMENT\n\n"
        "This Master Services Agreement is made on 1 May 2024 between Acme Inc. and Beta LLC."
    )
    assert first_page_title(page) == "MASTER SERVICES AGREEMENT"
    assert first_page_title("Office Lease Agreement\nThe landlord leases...") == (
        "Office Lease Agreement"
    )


def test_no_title_when_the_page_shows_none() -> None:
    assert first_page_title("") is None
    assert first_page_title("the parties agree that the rent is due monthly.") is None
    # A citation in the text is no caption.
    assert first_page_title("As held in Smith v. Jones, 5 F.4th 100 (2021), the rule...") is None
