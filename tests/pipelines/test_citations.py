import pytest

from pipelines.citations import (
    MAX_RANGE_PAGES,
    citation_line,
    format_citations,
    keep_pages,
    parse_citations,
)


@pytest.mark.parametrize(
    ("text", "pages"),
    [
        ("The term is two years [p. 3].", [3]),
        ("See [pp. 4-6] and (p. 9).", [4, 5, 6, 9]),
        ("Dosing (pp. 12–13); warnings [Page 2], [pages 7, 8].", [12, 13, 2, 7, 8]),
        ("[p.5] [P 6] [p. 5]", [5, 6]),
        ("[p. 2, 4-5; p. 9]", [2, 4, 5, 9]),
        ("[pp. 7-5]", [5, 6, 7]),
        ("No citation here, page 4, p. 5, [5], (see 6).", []),
    ],
)
def test_parse_citations(text: str, pages: list[int]) -> None:
    assert parse_citations(text) == pages


def test_an_absurd_range_keeps_only_its_ends() -> None:
    assert parse_citations(f"[pp. 1-{MAX_RANGE_PAGES + 100}]") == [1, MAX_RANGE_PAGES + 100]


def test_keep_pages_drops_pages_not_given() -> None:
    assert keep_pages([3, 99, 1], {1, 2, 3}) == [3, 1]


def test_formatting_round_trips_through_parsing() -> None:
    line = citation_line([7, 3, 5, 6, 3])
    assert line == "Sources: [p. 3], [pp. 5-7]"
    assert sorted(parse_citations(line)) == [3, 5, 6, 7]
    assert format_citations([]) == ""
