"""Dates and periods as documents write them, normalised to ISO 8601; placeholders are no date."""

import pytest

from pipelines.values.dates import find_dates, parse_date
from pipelines.values.durations import find_durations


@pytest.mark.parametrize(
    ("written", "iso"),
    [
        ("December 19, 2018", "2018-12-19"),
        ("Dec. 19, 2018", "2018-12-19"),
        ("Sept 3, 2001", "2001-09-03"),
        ("19 December 2018", "2018-12-19"),
        ("19th day of December, 2018", "2018-12-19"),
        ("19t h day of December, 2018", "2018-12-19"),  # an ordinal PDF text broke
        ("first day of June, 2001", "2001-06-01"),
        ("twenty-first day of March 1999", "1999-03-21"),
        ("2018-12-19", "2018-12-19"),
        ("12/19/2018", "2018-12-19"),  # month first, the US convention
        ("19/12/2018", "2018-12-19"),  # 19 cannot be a month
        ("19.12.2018", "2018-12-19"),  # dotted: day first
        ("12/19/18", "2018-12-19"),
    ],
)
def test_a_date_in_any_common_form_reads_as_its_iso_day(written: str, iso: str) -> None:
    (mention,) = find_dates(f"Signed {written} by both parties.")
    assert mention.iso == iso
    assert f"Signed {written} by"[mention.start : mention.end] == written


@pytest.mark.parametrize(
    "text",
    ["[•], 2020", "the [·] day of [·], 2019", "May 2009", "February 30, 2020", "13/13/2016", ""],
)
def test_placeholders_partial_and_impossible_dates_are_no_date(text: str) -> None:
    assert parse_date(text) is None


def test_several_dates_are_found_in_order_without_overlap() -> None:
    text = "Argued April 23, 2013—Decided June 13, 2013; see 2013-06-14."
    assert [m.iso for m in find_dates(text)] == ["2013-04-23", "2013-06-13", "2013-06-14"]


@pytest.mark.parametrize(
    ("written", "iso"),
    [
        ("five (5) years", "P5Y"),
        ("ninety (90) days", "P90D"),  # the digits decide
        ("thirty-six (36) months", "P36M"),
        ("30 calendar days", "P30D"),
        ("a one-year term", "P1Y"),
        ("successive annual periods", "P1Y"),
        ("two weeks", "P2W"),
    ],
)
def test_periods_normalise_to_iso_durations(written: str, iso: str) -> None:
    assert [m.iso for m in find_durations(written)] == [iso]


def test_the_period_of_a_renewal_is_the_one_with_its_unit() -> None:
    # "one (1) additional three (3) year period": the period is three years.
    assert [m.iso for m in find_durations("one (1) additional three (3) year period")] == ["P3Y"]
