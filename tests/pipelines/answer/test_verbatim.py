"""Quoted text must be a verbatim span of the document (whitespace, line-end hyphenation and
typographic marks aside); model citations of pages without the supporting text are dropped."""

from __future__ import annotations

from pipelines.answer.cited_pages import checked_citations
from pipelines.answer.verbatim import VerbatimIndex, fabricated_quotes, quoted_spans

DOCUMENT = (
    "12.1 This Agreement shall be gov-\nerned by the laws of the State of Ohio.\n"
    "The Licensee’s  fee is due\nmonthly."
)


def test_a_quote_is_found_across_line_breaks_hyphenation_and_typography() -> None:
    index = VerbatimIndex(DOCUMENT)
    assert index.holds("This Agreement shall be governed by the laws of the State of Ohio.")
    assert index.holds("The Licensee's fee is due monthly")
    assert not index.holds("This Agreement shall be governed by the laws of the State of Iowa")
    assert not index.holds("this agreement shall be governed")  # letters count as written


def test_made_up_quotes_are_named_and_short_quoted_terms_are_not_checked() -> None:
    answer = (
        "Section 12.1 says “This Agreement shall be governed by the laws of Ohio” and the "
        '"Licensee" pays "a fee of $5,000".'
    )
    assert [span.text for span in quoted_spans(answer)] == [
        "This Agreement shall be governed by the laws of Ohio",
        "a fee of $5,000",
    ]
    assert fabricated_quotes(answer, DOCUMENT) == [
        "This Agreement shall be governed by the laws of Ohio",
        "a fee of $5,000",
    ]
    assert fabricated_quotes("It is “governed by the laws of the State of Ohio.”", DOCUMENT) == []


def test_citations_of_pages_without_the_supporting_text_are_dropped() -> None:
    text, cited, dropped, by_model = checked_citations("Ohio law governs [p. 2] [p. 9].", [9])
    assert (text, cited, dropped, by_model) == ("Ohio law governs [p. 9].", [9], 1, True)
    text, cited, dropped, by_model = checked_citations("Ohio law governs (p. 2).", [9, 10])
    assert text == "Ohio law governs.\n\nSources: [pp. 9-10]" and cited == [9, 10]
    assert (dropped, by_model) == (1, False)
    # A parenthesis that is no citation stays.
    assert checked_citations("The fee (the “Fee”) [p. 9].", [9])[0] == "The fee (the “Fee”) [p. 9]."
