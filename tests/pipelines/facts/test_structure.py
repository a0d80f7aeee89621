"""Key facts read from the document's structure (pipelines.facts.by_structure), one generated PDF
per structure: SPL prescribing information, an OTC Drug Facts panel, an appellate opinion whose
docket number is a running header, a contract with roles, a term and an auto-renewal clause.
Each field's value, origin and quote are asserted; the model is not asked about them."""

from __future__ import annotations

import pytest

from pipelines.documents import document_text
from pipelines.facts.extract import extract_facts
from tests.pipelines import structured_documents as docs
from tests.pipelines.facts_documents import ScriptedModel, pdf_document


def _facts(document, model=None):
    result = extract_facts(document, model or ScriptedModel())
    text = document_text(document.pages)
    for fact in result.facts:  # every quote is the document's own characters
        for quote in fact.evidence:
            assert text[quote.start_char : quote.end_char] == quote.text, fact.field
    return result, {fact.field: fact for fact in result.facts}


@pytest.fixture(scope="module")
def spl(tmp_path_factory):
    return pdf_document(tmp_path_factory.mktemp("spl"), docs.SPL_PAGES, kind="medical")


@pytest.fixture(scope="module")
def opinion(tmp_path_factory):
    directory = tmp_path_factory.mktemp("opinion")
    return pdf_document(directory, docs.OPINION_PAGES, header=docs.OPINION_HEADER)


def test_a_prescribing_informations_fields_come_from_its_section_headings(spl) -> None:
    model = ScriptedModel()
    result, facts = _facts(spl, model)
    assert result.subkind == "label"
    assert result.stats["num_from_structure"] == 7
    assert model.prompts == []  # every field came from a heading: nothing to ask
    expected = {
        "drug_name": ("ZORVATIN TABLETS", "highlights, p. 1"),
        "boxed_warning": (
            "WARNING: SEVERE LIVER INJURY. Zorvatin can cause severe and fatal liver injury.",
            "boxed warning (highlights), p. 1",
        ),
        "indications": (
            "Zorvatin is a kinase blocker indicated for the treatment of adults with plaque "
            "psoriasis.",
            "highlights, INDICATIONS AND USAGE, p. 1",
        ),
        "dosage": (
            "Adults: 10 mg orally once daily with food.",
            "highlights, DOSAGE AND ADMINISTRATION, p. 1",
        ),
        "contraindications": ("Severe hepatic impairment.", "highlights, CONTRAINDICATIONS, p. 1"),
        "warnings": (
            "Liver injury: monitor liver tests monthly.",
            "highlights, WARNINGS AND PRECAUTIONS, p. 1",
        ),
        "interactions": (
            "Strong inhibitors of the liver enzyme raise zorvatin levels: halve the dose.",
            "highlights, DRUG INTERACTIONS, p. 1",
        ),
    }
    for name, (value, origin) in expected.items():
        assert (facts[name].value, facts[name].origin, facts[name].page) == (value, origin, 1)
    # The boxed warning's quote starts at its heading, on page 1.
    assert facts["boxed_warning"].evidence[0].text.startswith("WARNING: SEVERE LIVER INJURY")


def test_the_dose_table_of_section_2_becomes_rows_with_their_pages(spl) -> None:
    _, facts = _facts(spl)
    rows = [
        (row["indication"], row["population"], row["dose"], row["page"])
        for row in facts["dosage"].table
    ]
    assert rows == [
        ("Psoriasis", "Adults", "10 mg once daily", 3),
        ("Psoriasis", "Pediatric patients 6 to 17 years", "5 mg once daily", 3),
        ("Psoriatic arthritis", "Adults", "20 mg once daily", 3),
    ]
    text = document_text(spl.pages)
    first = facts["dosage"].table[0]
    assert text[first["start_char"] : first["end_char"]] == "Psoriasis Adults 10 mg once daily"
    # Nothing from the toxicology section's "50 mg/kg daily" in mice.
    assert all("mice" not in row["dose"] for row in facts["dosage"].table)


def test_a_label_without_highlights_reads_its_numbered_sections(tmp_path) -> None:
    pages = [docs.SPL_PAGES[1].split("FULL PRESCRIBING INFORMATION\n", 1)[1], *docs.SPL_PAGES[2:]]
    pages[0] = pages[0].replace("FULL PRESCRIBING INFORMATION\n", "")
    _, facts = _facts(pdf_document(tmp_path, pages, kind="medical"))
    assert facts["dosage"].origin == "section 2 DOSAGE AND ADMINISTRATION, p. 2"
    assert facts["contraindications"].value == (
        "Zorvatin is contraindicated in patients with severe hepatic impairment."
    )
    assert facts["boxed_warning"].origin == "boxed warning, p. 1"
    assert facts["interactions"].origin == "section 7 DRUG INTERACTIONS, p. 3"


def test_a_label_whose_warning_heading_is_absent_has_no_boxed_warning(tmp_path) -> None:
    pages = [page.replace("WARNING: SEVERE LIVER INJURY\n", "") for page in docs.SPL_PAGES]
    _, facts = _facts(pdf_document(tmp_path, pages, kind="medical"))
    assert (facts["boxed_warning"].source, facts["boxed_warning"].value) == ("none", "")
    assert facts["dosage"].source == "rule"  # the other sections are still read


def test_a_drug_facts_panel_is_read_by_its_headings(tmp_path) -> None:
    _, facts = _facts(pdf_document(tmp_path, docs.OTC_PAGES, kind="medical"))
    assert facts["drug_name"].value == "Quellamine"
    assert facts["indications"].value == (
        "temporarily relieves sneezing and runny nose due to hay fever"
    )
    assert facts["indications"].origin == "Drug Facts: Uses, p. 1"
    assert facts["contraindications"].value == "with any other product containing quellamine"
    assert facts["interactions"].value == "taking sedatives or tranquilizers"
    assert facts["warnings"].value.startswith(
        "Sleep alert: quellamine may cause marked drowsiness."
    )
    dosage = facts["dosage"]
    assert dosage.origin == "Drug Facts: Directions, p. 2"
    assert dosage.value == (
        "adults and children 12 years and over: take 1 tablet every 6 hours; "
        "children under 12 years: ask a doctor"
    )
    assert [(r["population"], r["dose"]) for r in dosage.table] == [
        ("adults and children 12 years and over", "1 tablet every 6 hours")
    ]
    assert facts["boxed_warning"].source == "none"  # a Drug Facts panel has none


def test_the_docket_number_repeated_as_a_header_stays_on_page_1(opinion) -> None:
    assert opinion.pages[0].text.startswith(docs.OPINION_HEADER)
    assert all(docs.OPINION_HEADER not in page.text for page in opinion.pages[1:])


def test_an_appellate_opinions_caption_and_conclusion(opinion) -> None:
    result, facts = _facts(opinion)
    assert result.subkind == "opinion"
    expected = {
        "case_parties": ("ORLANDO PETRAKIS-VANE v. HOLLOWAY DRAINAGE DISTRICT", "caption, p. 1"),
        "parties": (
            "ORLANDO PETRAKIS-VANE (plaintiff-appellant); "
            "HOLLOWAY DRAINAGE DISTRICT (defendant-appellee)",
            "caption, p. 1",
        ),
        "docket_number": ("No. 21-3344", "caption, p. 1"),
        "lower_docket_number": ("No. 4:19-cv-00817", "caption (court below), p. 1"),
        "judges": (
            "Marchetti, Chief Judge; Okafor, Circuit Judge; Lindqvist, Circuit Judge",
            "caption, p. 1",
        ),
        # The majority's order, not the dissent's "I would affirm".
        "disposition": ("reversed and remanded", "disposition line, p. 3"),
    }
    for name, (value, origin) in expected.items():
        assert (facts[name].value, facts[name].origin) == (value, origin), name
    assert facts["court"].value == "United States Court of Appeals For the Ninth Example Circuit"
    assert facts["decision_date"].normalized == "2022-03-09"


def test_without_a_concluding_line_the_last_order_of_the_majority_counts(tmp_path) -> None:
    pages = [*docs.OPINION_PAGES[:2], docs.OPINION_PAGES[2].replace("REVERSED AND REMANDED.\n", "")]
    _, facts = _facts(pdf_document(tmp_path, pages))
    assert (facts["disposition"].value, facts["disposition"].origin) == (
        "reversed and remanded",
        "conclusion, p. 3",
    )
    assert "we reverse the judgment" in facts["disposition"].evidence[0].text


def test_a_contracts_roles_term_and_renewal_come_from_its_clauses(tmp_path) -> None:
    _, facts = _facts(pdf_document(tmp_path, docs.CONTRACT_PAGES))
    parties = facts["parties"]
    assert parties.value == "Tamarind Logic Inc. (Licensor); Pellucid Freight LLC (Licensee)"
    assert parties.origin == "preamble, p. 1"
    term = facts["expiration_date"]
    # The agreement's own term, not the five years confidentiality lasts after it.
    assert (term.value, term.normalized, term.origin) == (
        "three (3) years",
        "P3Y",
        "clause 3, p. 2",
    )
    assert term.evidence[0].text.startswith("The initial term of this Agreement")
    renewal = facts["renewal_term"]
    assert (renewal.normalized, renewal.origin) == ("P1Y", "clause 4, p. 2")
    assert facts["governing_law"].origin == "clause 5, p. 2"


def test_a_period_a_duty_lasts_after_the_term_is_not_the_term() -> None:
    from pipelines.documents import PageText
    from pipelines.facts.contract_terms import read_term
    from pipelines.retrieval.evidence import DocumentSentences

    survival = (
        "5.1 Confidentiality. During the term of this Agreement and for a period of seven (7) "
        "years after its termination or expiration each Party shall keep the other's data "
        "in confidence."
    )
    assert read_term(DocumentSentences([PageText(8, survival)])) is None
    term = "8.1 Term. This Agreement shall remain in effect for a period of four (4) years."
    found = read_term(DocumentSentences([PageText(8, survival), PageText(9, term)]))
    assert found is not None and found.normalized == "P4Y"


def test_the_number_below_from_the_opinion_s_citation_of_its_own_case() -> None:
    """A slip opinion's caption gives only its own number; the district court's is where the
    opinion cites that court's decision in this case, by number alone."""
    from pipelines.documents import PageText
    from pipelines.facts.caption import read_caption
    from pipelines.retrieval.evidence import DocumentSentences

    pages = [
        PageText(1, "SUPREME COURT OF THE UNITED STATES\nNo. 31-118\nHARLOW MILLS v. LAKE BOARD"),
        PageText(
            2,
            "Harlow Mills relied on Brandt v. Lowe, No. 14-5521 (ND Ill., 2015), decided by a "
            "District Court elsewhere. The District Court granted summary judgment for the "
            "Board on both claims. See No. CIV–29–  0112–RK, 2030 WL 123456 (ED Tex., May 2, "
            "2030). We affirm.",
        ),
    ]
    found = read_caption(DocumentSentences(pages))
    assert found["docket_number"].normalized == "No. 31-118"
    lower = found["lower_docket_number"]
    assert (lower.normalized, lower.origin) == (
        "No. CIV-29-0112-RK",
        "citation of the decision below, p. 2",
    )
    text = DocumentSentences(pages).text
    assert lower.value == "No. CIV–29–0112–RK"  # as written, less the PDF's line break
    assert any("District Court granted" in text[s:e] for s, e in lower.spans)
    # Without the citation of its own case, none: another case's number is not it.
    pages[1] = PageText(2, pages[1].text.split(" See No.")[0])
    assert "lower_docket_number" not in read_caption(DocumentSentences(pages))
