"""A summary's lead from the key facts (pipelines/summary/lead.py), by sub-kind: an opinion's
court, parties and decision; a label's drug, boxed warning, indications and adult dose; a
contract's agreement, parties, term and governing law. Each line is supported by its facts'
quotes with their pages; nothing that was not found, nothing unquoted, nothing said twice."""

from __future__ import annotations

from pipelines.answer.from_facts import KnownFact
from pipelines.facts.extract import extract_facts
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.summary.lead import ELLIPSIS, MAX_VALUE_CHARS, lead_sentences, subkind_of
from tests.pipelines.facts_documents import (
    CONTRACT_PAGES,
    OPINION_PAGES,
    ScriptedModel,
    text_document,
)

LAW_QUESTION = "Which state's or country's law governs this agreement?"
# An invented drug label: every name and number is made up.
WARNING_TEXT = (
    "Velmorant can cause severe liver injury that may lead to liver transplant or death in "
    "patients with or without a history of liver disease and in patients who take other "
    "medicines that are processed by the liver"
)
LABEL_PAGES = [
    "VELMORANT tablets\n\nWARNING: SEVERE LIVER INJURY\n\n" + WARNING_TEXT + ".",
    "INDICATIONS AND USAGE\n\nVelmorant is indicated for the treatment of chronic plaque "
    "psoriasis in adults who are candidates for systemic therapy. It is also indicated for "
    "psoriatic arthritis in adults.",
    "DOSAGE AND ADMINISTRATION\n\nAdults: 40 mg once daily with food. Children 6 to 11 "
    "years: 20 mg once daily with food.",
]


def _known(fact) -> KnownFact:
    spans = tuple((quote.start_char, quote.end_char) for quote in fact.evidence)
    return KnownFact(fact.field, fact.label, fact.value, spans, missing=not fact.value)


def _span(sentences: DocumentSentences, text: str) -> tuple[int, int]:
    start = sentences.text.index(text)
    return (start, start + len(text))


def _fact(sentences, field: str, value: str, *quoted: str) -> KnownFact:
    return KnownFact(field, field, value, tuple(_span(sentences, text) for text in quoted))


def _assert_verbatim(lead, sentences: DocumentSentences) -> None:
    for line in lead:  # every quote is the document's own characters, on its page
        assert line.status == "supported" and line.quotes
        for quote in line.quotes:
            assert sentences.text[quote.start_char : quote.end_char] == quote.text
            assert quote.page == sentences.page_of(quote.start_char)


def test_an_opinion_leads_with_its_court_parties_and_decision() -> None:
    document = text_document(OPINION_PAGES)
    facts = [_known(fact) for fact in extract_facts(document, ScriptedModel()).facts]
    sentences = DocumentSentences(document.pages)

    lead = lead_sentences(facts, sentences, document.passages)

    # The docket number and the date alone are on the Key facts tab; the date goes with the
    # decision.
    assert [line.text for line in lead] == [
        "Court: COURT OF APPEALS OF THE STATE OF EXAMPLE.",
        "Parties: HALVERSEN TIMBER COMPANY v. COUNTY OF BRISTLECONE.",
        "Decision: affirmed, on October 5, 2020.",
    ]
    decision = lead[-1]
    assert decision.page == 3  # the disposition's quote first, then the date's
    assert "we affirm the judgment" in decision.quotes[0].text
    assert "Decided October 5, 2020" in decision.quotes[-1].text
    assert decision.quotes[-1].page == 1
    _assert_verbatim(lead, sentences)


def test_a_contract_leads_with_its_agreement_parties_term_and_law() -> None:
    document = text_document(CONTRACT_PAGES)
    model = ScriptedModel({LAW_QUESTION: "Oregon"})
    facts = [_known(fact) for fact in extract_facts(document, model).facts]
    sentences = DocumentSentences(document.pages)

    lead = lead_sentences(facts, sentences, document.passages)

    assert [line.text for line in lead] == [
        "Agreement: MASTER SUPPLY AGREEMENT.",
        "Parties: Quillfeather Instruments, Inc.; Marrowby Analytics LLC.",
        "Term: ends March 31, 2026; renews for one (1) year.",
        "Governing law: Oregon.",
    ]
    assert [line.page for line in lead] == [1, 1, 2, 3]
    term = lead[2]
    assert any("expire on March 31, 2026" in q.text for q in term.quotes)
    assert any("successive one (1)" in q.text for q in term.quotes)
    _assert_verbatim(lead, sentences)


def test_a_label_leads_with_drug_boxed_warning_indications_and_adult_dose() -> None:
    document = text_document(LABEL_PAGES, kind="medical")
    sentences = DocumentSentences(document.pages)
    indications = (
        "Velmorant is indicated for the treatment of chronic plaque psoriasis in adults who "
        "are candidates for systemic therapy. It is also indicated for psoriatic arthritis in "
        "adults."
    )
    facts = [
        # Fields the facts job adds beside today's (drug_name, warnings, interactions), and a
        # dosage stored one row a line.
        _fact(sentences, "drug_name", "Velmorant", "VELMORANT tablets"),
        _fact(sentences, "boxed_warning", WARNING_TEXT, WARNING_TEXT),
        _fact(sentences, "indications", indications, "Velmorant is indicated", "It is also"),
        _fact(
            sentences,
            "dosage",
            "Children 6 to 11 years: 20 mg once daily with food\nAdults: 40 mg once daily with food",
            "Adults: 40 mg",
            "Children 6 to 11",
        ),
        KnownFact("contraindications", "Contraindications", "", missing=True),
        _fact(sentences, "warnings", "Velmorant can cause severe liver injury", "Velmorant can"),
        _fact(sentences, "interactions", "medicines that are processed by the liver", "medicines"),
    ]

    lead = lead_sentences(facts, sentences, document.passages)

    drug, warning, indicated, dose = lead
    assert drug.text == "Drug: Velmorant." and drug.page == 1
    # A long value: cut at a word with an ellipsis, its quote still the whole sentence.
    assert warning.text.startswith("Boxed warning: Velmorant can cause severe liver injury")
    assert warning.text.endswith(f" {ELLIPSIS}") and "processed by the liver" not in warning.text
    assert len(warning.text) <= len("Boxed warning: ") + MAX_VALUE_CHARS + 2
    assert warning.quotes[0].text.rstrip(".").endswith("processed by the liver")
    # Two sentences: the first one, whole.
    assert indicated.text == (
        "Indications: Velmorant is indicated for the treatment of chronic plaque psoriasis in "
        "adults who are candidates for systemic therapy."
    )
    assert indicated.page == 2 and len(indicated.quotes) == 2
    # The adult row of the dosage, without its own "Adults:" label.
    assert dose.text == "Adult dose: 40 mg once daily with food." and dose.page == 3
    _assert_verbatim(lead, sentences)


def test_an_opinion_s_parties_with_roles_lead_where_no_caption_was_read() -> None:
    document = text_document(OPINION_PAGES)
    sentences = DocumentSentences(document.pages)
    caption = "HALVERSEN TIMBER COMPANY v. COUNTY OF BRISTLECONE"
    roles = "HALVERSEN TIMBER COMPANY (appellant); COUNTY OF BRISTLECONE (appellee)"
    with_roles = _fact(sentences, "parties", roles, "HALVERSEN TIMBER COMPANY,")
    facts = [
        KnownFact("case_parties", "Parties", "", missing=True),
        with_roles,
        _fact(sentences, "lower_docket_number", "No. 19-4417", "No. 19-4417"),
        _fact(sentences, "disposition", "affirmed", "For these reasons"),
    ]
    assert subkind_of(facts) == "opinion"  # "parties" alone would not tell

    lead = lead_sentences(facts, sentences, document.passages)

    assert [line.text for line in lead] == [f"Parties: {roles}.", "Decision: affirmed."]
    # Both read: the caption leads, with its own quotes only.
    caption_fact = _fact(sentences, "case_parties", caption, "No. 19-4417")
    (parties, _) = lead_sentences([caption_fact, *facts[1:]], sentences, document.passages)
    assert parties.text == f"Parties: {caption}."
    assert [q.text for q in parties.quotes] == [
        q.text for q in lead_sentences([caption_fact], sentences, document.passages)[0].quotes
    ]


def test_missing_unquoted_and_repeated_facts_do_not_lead() -> None:
    document = text_document(["Made on May 1, 2020 by Acme Corp and Beta LLC. Ohio law governs."])
    sentences = DocumentSentences(document.pages)
    whole = (0, len(sentences.text))
    facts = [
        KnownFact("document_name", "Document name", "", missing=True),  # searched, not found
        KnownFact("parties", "Parties", "Acme Corp; Beta LLC", ()),  # no quote: not shown
        KnownFact("agreement_date", "Agreement date", "May 1, 2020", (whole,)),  # not a lead item
        KnownFact("expiration_date", "Expiration", "perpetual", ((5, 10_000),)),  # span past text
        KnownFact("renewal_term", "Renewal term", "Ohio", (whole,)),
        KnownFact("governing_law", "Governing law", "Ohio", (whole,)),  # said already
    ]

    lead = lead_sentences(facts, sentences, document.passages)

    assert [line.text for line in lead] == ["Renewal term: Ohio."]
    assert lead[0].quotes[0].page == 1


def test_no_lead_without_a_sub_kind_that_has_one_and_a_dose_without_adults() -> None:
    document = text_document(["Offer walking to adults with knee pain. Take 5 mg daily."])
    sentences = DocumentSentences(document.pages)
    guideline = [_fact(sentences, "population", "adults with knee pain", "Offer walking")]
    assert subkind_of(guideline) is None
    assert lead_sentences(guideline, sentences, document.passages) == []
    assert lead_sentences([], sentences, document.passages) == []

    dose = [_fact(sentences, "dosage", "5 mg daily", "Take 5 mg")]
    (line,) = lead_sentences(dose, sentences, document.passages)
    assert line.text == "Dose: 5 mg daily."
