"""A summary's lead from the key facts (pipelines/summary/lead.py): the identifying facts, one
supported line each with the fact's quotes and page; nothing that was not found, no long
extracts, nothing said twice."""

from __future__ import annotations

from pipelines.answer.from_facts import KnownFact
from pipelines.facts.extract import extract_facts
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.summary.lead import lead_sentences
from tests.pipelines.facts_documents import OPINION_PAGES, ScriptedModel, text_document


def _known(fact) -> KnownFact:
    spans = tuple((quote.start_char, quote.end_char) for quote in fact.evidence)
    return KnownFact(fact.field, fact.label, fact.value, spans, missing=not fact.value)


def test_an_opinion_leads_with_its_court_case_date_and_disposition() -> None:
    document = text_document(OPINION_PAGES)
    facts = [_known(fact) for fact in extract_facts(document, ScriptedModel()).facts]
    sentences = DocumentSentences(document.pages)

    lead = lead_sentences(facts, sentences, document.passages)

    assert [line.text for line in lead] == [
        "Court: COURT OF APPEALS OF THE STATE OF EXAMPLE.",
        "Parties: HALVERSEN TIMBER COMPANY v. COUNTY OF BRISTLECONE.",
        # The caption's roles (a field of its own since issue 21).
        "Parties and roles: HALVERSEN TIMBER COMPANY (plaintiff-appellant); "
        "COUNTY OF BRISTLECONE (defendant-appellee).",
        "Docket number: No. 19-4417.",
        "Date: October 5, 2020.",
        "Disposition: affirmed.",
    ]
    assert all(line.status == "supported" and line.quotes for line in lead)
    outcome = lead[-1]
    assert outcome.page == 3
    assert "we affirm the judgment" in " ".join(quote.text for quote in outcome.quotes)
    for line in lead:  # every quote is the document's own characters, on its page
        for quote in line.quotes:
            assert sentences.text[quote.start_char : quote.end_char] == quote.text
            assert quote.page == sentences.page_of(quote.start_char)


def test_missing_long_repeated_and_unquoted_facts_do_not_lead() -> None:
    document = text_document(["Made on May 1, 2020 by Acme Corp and Beta LLC. Ohio law governs."])
    sentences = DocumentSentences(document.pages)
    whole = (0, len(sentences.text))
    facts = [
        KnownFact("agreement_date", "Agreement date", "May 1, 2020", (whole,)),
        KnownFact("effective_date", "Effective date", "May 1, 2020", (whole,)),  # said already
        KnownFact("parties", "Parties", "Acme Corp; Beta LLC", ()),  # no quote: not shown
        KnownFact("governing_law", "Governing law", "", missing=True),  # searched, not found
        KnownFact("anti_assignment", "Anti-assignment", "Yes", (whole,)),  # a clause
        KnownFact("indications", "Indications", "Adults with gout.", (whole,)),  # an extract
        KnownFact("court", "Court", "Supreme Court", ((5, 10_000),)),  # a span past the text
    ]

    lead = lead_sentences(facts, sentences, document.passages)

    assert [line.text for line in lead] == ["Agreement date: May 1, 2020."]
    assert lead[0].quotes[0].page == 1
