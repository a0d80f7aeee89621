"""Pure pieces of the UI: mapping passage offsets onto a page, escaping."""

from __future__ import annotations

from dataclasses import dataclass

from ui.components.page_text import highlight_spans, page_html, page_start_offsets


@dataclass
class P:
    number: int
    text: str


@dataclass
class Span:
    start_char: int
    end_char: int


PAGES = [P(1, "Alpha beta."), P(2, "Gamma delta. Epsilon."), P(3, "Zeta.")]
# Document text: "Alpha beta.\n\nGamma delta. Epsilon.\n\nZeta."; page 2 starts at 13, page 3 at 36.


def test_offsets_follow_the_blank_line_between_pages() -> None:
    assert page_start_offsets(PAGES) == {1: 0, 2: 13, 3: 36}


def test_a_passage_across_pages_is_cut_to_each_page_and_overlaps_merge() -> None:
    across = Span(6, 25)  # "beta.\n\nGamma delta."
    epsilon = Span(26, 34)
    overlapping = Span(20, 30)
    assert highlight_spans(PAGES[0], 0, [across]) == [(6, 11)]
    assert highlight_spans(PAGES[1], 13, [across, epsilon]) == [(0, 12), (13, 21)]
    assert highlight_spans(PAGES[1], 13, [across, overlapping, epsilon]) == [(0, 21)]
    assert highlight_spans(PAGES[2], 36, [across, epsilon]) == []


def test_page_html_escapes_text_and_keeps_to_one_line() -> None:
    html = page_html("a <script>x</script>\n\nb & c", [(2, 10)])
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "\n" not in html and html.count("<mark") == 1
    assert "(This page has no text.)" in page_html("")
