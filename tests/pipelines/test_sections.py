import pytest

from pipelines.documents import document_text
from pipelines.sections import Section, cut_sections, ends_paragraph, halve, passage_cost
from tests.pipelines.echo_model import filler_page, make_document


@pytest.mark.parametrize("budget", [60, 100, 250])
def test_sections_are_whole_passages_in_order_within_budget(budget: int) -> None:
    document = make_document([filler_page(n) for n in range(1, 9)], max_tokens=40)
    sections = cut_sections(document.pages, document.passages, budget)
    assert len(sections) > 1
    flattened = [p for section in sections for p in section.passages]
    assert flattened == list(document.passages)
    for section in sections:
        assert section.num_tokens <= budget
        assert section.num_tokens == sum(passage_cost(p) for p in section.passages)
    pages = [(s.first_page, s.last_page) for s in sections]
    assert pages == sorted(pages)


def test_a_full_section_prefers_to_end_at_a_paragraph() -> None:
    document = make_document([filler_page(n) for n in range(1, 9)], max_tokens=14)
    text = document_text(document.pages)
    sections = cut_sections(document.pages, document.passages, 100)
    # Some passages end mid-paragraph, yet every section but the last ends a paragraph.
    assert not all(ends_paragraph(text, p) for p in document.passages)
    assert all(ends_paragraph(text, s.passages[-1]) for s in sections)


def test_an_oversized_passage_is_a_section_of_its_own() -> None:
    document = make_document([filler_page(1), filler_page(2)], max_tokens=40)
    big = max(document.passages, key=passage_cost)
    sections = cut_sections(document.pages, document.passages, passage_cost(big) - 1)
    assert Section((big,)) in sections


def test_halve_splits_at_a_passage_boundary() -> None:
    document = make_document([filler_page(1), filler_page(2)], max_tokens=20)
    section = Section(document.passages)
    first, second = halve(section)
    assert first.passages + second.passages == document.passages
    assert first.passages and second.passages
    assert halve(Section(document.passages[:1])) == [Section(document.passages[:1])]
