"""PDF parsing: text cleaning rules, refusals with typed errors, and the child process's limits."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import time
from pathlib import Path

import pytest

from pipelines.documents import ParsedDocument
from pipelines.errors import (
    DamagedPdfError,
    NotAPdfError,
    NoTextLayerError,
    ParseMemoryError,
    ParseTimeoutError,
    PasswordRequiredError,
    TooLargeError,
    TooManyPagesError,
    WrongPasswordError,
)
from pipelines.ingest.limits import ParseLimits
from pipelines.ingest.parse import _run_child, parse_pdf, parse_pdf_in_process, parse_pdf_outcome
from pipelines.ingest.pdf_text import (
    assemble_paragraphs,
    clean_pages,
    clean_title,
    join_hyphenated,
    normalize_chars,
    remove_running_furniture,
    split_lines,
)
from tests.pipelines import pdf_factory

BODY = (
    "This Services Agreement is made between the Company and the Supplier on the date below.\n"
    "The Supplier shall meet its obli-\n"
    "gation to deliver the Services with due care, and third-\n"
    "party claims stay with the Company.\n"
    "Payment is due in thirty days."
)
PAGES = [BODY, "The Company may end this Agreement by written notice to the Supplier.", BODY]


@pytest.fixture
def contract(tmp_path: Path) -> Path:
    return pdf_factory.text_pdf(
        tmp_path,
        PAGES,
        header="ACME Corp - Confidential",
        footer="Page {n} of {total}",
        title="Master Services Agreement",
    )


# Characters and whitespace.


def test_ligatures_fold_to_ascii_and_symbols_survive() -> None:
    text = "ﬁnancial ofﬁce ﬂow ﬀ ﬃ ﬄ ﬅ ﬆ; § 4 ¶ 2 at 40 °C, 5 µg, ½ dose, m², Brand™"
    assert normalize_chars(text) == (
        "financial office flow ff ffi ffl st st; § 4 ¶ 2 at 40 °C, 5 µg, ½ dose, m², Brand™"
    )


def test_controls_zero_width_and_odd_spaces_go() -> None:
    text = "a\x00b\x07c\u200bd\ufeffe\u00a0f\u2009g\tｈ\r\ni\u00adj\ud800"
    assert normalize_chars(text) == "abcde f g h\nij"


def test_soft_hyphen_at_a_line_end_joins_the_word() -> None:
    assert normalize_chars("the obli\u00ad \ngation") == "the obligation"


def test_lines_are_trimmed_and_spaces_collapsed() -> None:
    assert split_lines("  two   spaces \t here \n\n  next ") == ["two spaces here", "", "next"]


@pytest.mark.parametrize(
    ("lines", "joined"),
    [
        (["its obli-", "gation to pay"], ["its obligation", "to pay"]),
        (["the Obli-", "gation."], ["the Obligation."]),
        (["Third-", "Party rights"], ["Third-Party", "rights"]),
        (["the COVID-", "19 pandemic"], ["the COVID-19", "pandemic"]),
        (["at 283-", "288 (D. Me.)"], ["at 283-288", "(D. Me.)"]),
        (["non-", "exclusive licence"], ["non-exclusive", "licence"]),
        (["and third-", "party claims"], ["and third-party", "claims"]),
        (["terms-and-", "conditions"], ["terms-and-conditions"]),
        (["ABC-", "def"], ["ABC-def"]),
        (["- 3 -", "next"], ["- 3 -", "next"]),
        (["ends with a dash -", "next"], ["ends with a dash -", "next"]),
        (["obli-", "", "gation"], ["obli-", "", "gation"]),
    ],
)
def test_line_end_hyphens(lines: list[str], joined: list[str]) -> None:
    assert join_hyphenated(lines) == joined


def test_the_document_decides_ambiguous_hyphens() -> None:
    lines = ["a long-", "term lease and co-", "operation"]
    known = frozenset({"long-term", "cooperation"})
    assert join_hyphenated(lines, known) == ["a long-term", "lease and cooperation"]
    assert join_hyphenated(lines) == ["a longterm", "lease and cooperation"]


def test_paragraphs_are_separated_by_one_blank_line() -> None:
    lines = [
        "ARTICLE I",
        "DEFINITIONS",
        "The terms below have these meanings in the whole of this Agreement, and",
        "in every schedule to it.",
        "“Services” means the work set out in Schedule 1 to this Agreement, and",
        "the reports that come with it:",
        "(a) the monthly report;",
        "(b) the yearly audit.",
        "",
        "",
        "Clause 2 begins here after a blank line in the extraction.",
    ]
    text = assemble_paragraphs(lines, typical_length=72)
    assert text.split("\n\n") == [
        "ARTICLE I\nDEFINITIONS",
        "The terms below have these meanings in the whole of this Agreement, and\n"
        "in every schedule to it.",
        "“Services” means the work set out in Schedule 1 to this Agreement, and\n"
        "the reports that come with it:",
        "(a) the monthly report;",
        "(b) the yearly audit.",
        "Clause 2 begins here after a blank line in the extraction.",
    ]


# Running headers, footers and page numbers.


WORDS = ("payment", "delivery", "warranty", "liability", "termination", "notices", "law")


def test_running_headers_footers_and_page_numbers_go() -> None:
    pages = [
        ["ACME Corp  Confidential", f"- {n} -", f"Clause on {word}", f"Page {n} of 12"]
        for n, word in enumerate(WORDS[:5], start=1)
    ]
    cleaned, num_removed = remove_running_furniture(pages)
    assert cleaned == [[f"Clause on {word}"] for word in WORDS[:5]]
    assert num_removed == 15


def test_a_bare_page_number_and_roman_numerals_go() -> None:
    numerals = ("i", "ii", "iii", "iv")
    pages = [
        [f"Preface on {word}", numeral] for word, numeral in zip(WORDS, numerals, strict=False)
    ]
    pages += [[f"Chapter on {word}", str(n)] for n, word in enumerate(WORDS[:4], start=1)]
    cleaned, num_removed = remove_running_furniture(pages)
    assert num_removed == 8
    assert all(len(lines) == 1 and " on " in lines[0] for lines in cleaned)


def test_a_footer_of_several_lines_goes_entirely() -> None:
    footer = [
        "Guideline CG141",
        "© NICE 2025. All rights reserved.",
        "Subject to notice",
        "Page {n}",
    ]
    pages = [
        [f"On {word}", f"More on {word}", *[line.format(n=n) for line in footer]]
        for n, word in enumerate(WORDS[:4], start=1)
    ]
    cleaned, _ = remove_running_furniture(pages)
    assert cleaned == [[f"On {word}", f"More on {word}"] for word in WORDS[:4]]


def test_a_line_on_two_pages_or_under_60_percent_stays() -> None:
    two_of_three = [["Recitals", "On payment"], ["Recitals", "On delivery"], ["Other", "On law"]]
    assert remove_running_furniture(two_of_three) == (two_of_three, 0)
    # 5 of 10 pages (50%) is not "most pages".
    words = [*WORDS, "scope", "price", "term"]
    half = [["Draft", f"On {word}"] if n % 2 else [f"On {word}"] for n, word in enumerate(words)]
    assert remove_running_furniture(half) == (half, 0)


def test_a_repeated_line_in_the_middle_of_a_page_stays() -> None:
    pages = [
        [
            *(f"{part} on {word}" for part in "abc"),
            "Notwithstanding",
            *(f"{p} on {word}" for p in "def"),
        ]
        for word in WORDS[:4]
    ]
    assert remove_running_furniture(pages) == (pages, 0)


@pytest.mark.parametrize(
    "header", ["No. 21-3344", "Case: 1:19-cv-00817 Document: 12 Page: {n}", "Docket No. 363A14-4"]
)
def test_a_repeated_case_number_stays_where_it_first_occurs(header) -> None:
    # An opinion's docket number is printed atop every page: it is furniture on pages 2 and
    # on, but on page 1 it is the caption's number.
    pages = [
        [header.format(n=n), f"Part on {word}", f"More on {word}"]
        for n, word in enumerate(WORDS[:4], start=1)
    ]
    cleaned, num_removed = remove_running_furniture(pages)
    assert cleaned[0] == pages[0]
    assert cleaned[1:] == [[f"Part on {word}", f"More on {word}"] for word in WORDS[1:4]]
    assert num_removed == 3


def test_when_the_repeated_line_is_all_there_is_it_stays() -> None:
    cleaned, num_removed = clean_pages(["Habibi rotated"] * 4)
    assert cleaned == ["Habibi rotated"] * 4
    assert num_removed == 0


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ("Master Services Agreement", "Master Services Agreement"),
        ("  Annual\x00 report\n2024 ", "Annual report 2024"),
        (b"Bytes title", "Bytes title"),
        ("Microsoft Word - Lease Agreement.docx", "Lease Agreement"),
        ("untitled", None),
        ("Binder1.pdf", None),
        ("doi:", None),
        ("6489122611071476 1..10", None),
        ("", None),
        (None, None),
        ("x" * 400, None),
    ],
)
def test_metadata_titles(raw: object, title: str | None) -> None:
    assert clean_title(raw) == title


# Whole PDFs, in this process.


def test_a_multi_page_contract_parses_clean(contract: Path) -> None:
    outcome = parse_pdf_outcome(contract, in_child=False)
    document = outcome.document
    assert document.title == "Master Services Agreement"
    assert not document.was_encrypted
    assert [page.number for page in document.pages] == [1, 2, 3]
    text = "\n\n".join(page.text for page in document.pages)
    assert "ACME Corp" not in text and "Page " not in text
    assert outcome.num_furniture_lines == 6
    assert "its obligation\nto deliver" in document.pages[0].text
    assert "third-party\nclaims stay with the Company.\n\nPayment is due" in document.pages[0].text
    assert document.pages[1].text == PAGES[1]
    assert outcome.num_failed_pages == 0


def test_a_header_on_only_two_pages_stays(tmp_path: Path) -> None:
    two_pages = pdf_factory.text_pdf(tmp_path, PAGES[:2], header="Draft for discussion")
    document = parse_pdf_in_process(two_pages)
    assert all(page.text.startswith("Draft for discussion\n") for page in document.pages)


def test_ligatures_in_a_pdf_fold(tmp_path: Path) -> None:
    font = pdf_factory.unicode_font()
    if font is None:
        pytest.skip("no DejaVuSans.ttf on this machine to write ligatures with")
    line = "The ﬁnancial ofﬁce will ﬂag the aﬃliate’s ﬁles under § 12 ¶ 3 (5 µg at 40 °C)."
    document = parse_pdf_in_process(pdf_factory.text_pdf(tmp_path, [line], font=font))
    assert document.pages[0].text == (
        "The financial office will flag the affiliate’s files under § 12 ¶ 3 (5 µg at 40 °C)."
    )


def test_soft_hyphens_in_a_pdf_join(tmp_path: Path) -> None:
    lines = "A word broken by a soft hyph\u00ad\nenation joins again, and stays one word here."
    document = parse_pdf_in_process(pdf_factory.text_pdf(tmp_path, [lines]))
    assert "hyphenation joins again" in document.pages[0].text
    assert "\u00ad" not in document.pages[0].text


def test_an_empty_page_stays_in_place_and_empty(tmp_path: Path) -> None:
    document = parse_pdf_in_process(pdf_factory.text_pdf(tmp_path, [BODY, "", BODY]))
    assert [page.text == "" for page in document.pages] == [False, True, False]
    assert document.pages[2].number == 3


def test_a_page_pypdf_fails_on_stays_empty_and_is_counted(contract: Path) -> None:
    broken = pdf_factory.failing_page_pdf(contract, page_index=1)
    outcome = parse_pdf_outcome(broken, in_child=False)
    assert outcome.num_failed_pages == 1
    assert outcome.document.pages[1].text == ""
    assert "obligation" in outcome.document.pages[0].text


def test_a_pdf_no_page_can_be_read_from_is_damaged(tmp_path: Path) -> None:
    one_page = pdf_factory.text_pdf(tmp_path, [BODY])
    with pytest.raises(DamagedPdfError):
        parse_pdf_in_process(pdf_factory.failing_page_pdf(one_page, page_index=0))


def test_leading_junk_before_the_header_is_tolerated(contract: Path) -> None:
    document = parse_pdf_in_process(pdf_factory.with_leading_junk(contract))
    assert document.num_pages == 3


def test_not_a_pdf_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotAPdfError, match="not a PDF"):
        parse_pdf_in_process(pdf_factory.not_a_pdf(tmp_path))
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    with pytest.raises(NotAPdfError, match="empty"):
        parse_pdf_in_process(empty)


def test_truncated_or_garbage_pdf_is_damaged(contract: Path) -> None:
    for path in (pdf_factory.truncated(contract), pdf_factory.garbage_pdf(contract.parent)):
        with pytest.raises(DamagedPdfError, match="damaged"):
            parse_pdf_in_process(path)


def test_a_scan_without_text_layer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NoTextLayerError, match="OCR"):
        parse_pdf_in_process(pdf_factory.image_only_pdf(tmp_path))


def test_limits_on_size_and_pages(contract: Path) -> None:
    with pytest.raises(TooLargeError, match="MB"):
        parse_pdf_in_process(contract, limits=ParseLimits(max_bytes=1000))
    with pytest.raises(TooManyPagesError, match="3 pages"):
        parse_pdf_in_process(contract, limits=ParseLimits(max_pages=2))


def test_encrypted_pdf_needs_the_right_password(contract: Path) -> None:
    locked = pdf_factory.encrypted_pdf(contract, user_password="s3cret", owner_password="owner")
    with pytest.raises(PasswordRequiredError, match="password"):
        parse_pdf_in_process(locked)
    with pytest.raises(WrongPasswordError):
        parse_pdf_in_process(locked, password="guess")
    for password in ("s3cret", "owner"):
        document = parse_pdf_in_process(locked, password=password)
        assert document.was_encrypted and document.num_pages == 3
        assert "obligation" in document.pages[0].text


def test_an_owner_password_alone_does_not_stop_reading(contract: Path) -> None:
    locked = pdf_factory.encrypted_pdf(contract, user_password="", owner_password="owner")
    assert parse_pdf_in_process(locked).was_encrypted
    assert parse_pdf_in_process(locked, password="unneeded").num_pages == 3


def test_no_document_text_reaches_the_logs(
    contract: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for path in (
        pdf_factory.truncated(contract, keep_share=0.9),
        pdf_factory.with_leading_junk(contract),
    ):
        with contextlib.suppress(DamagedPdfError):
            parse_pdf_in_process(path)
    assert not [record for record in caplog.records if record.name.startswith("pypdf")]
    assert not [record for record in caplog.records if "Supplier" in record.getMessage()]


# Through the child process.


def test_the_child_gives_the_same_document(contract: Path) -> None:
    assert parse_pdf(contract) == parse_pdf_in_process(contract)


def test_the_child_raises_typed_errors(contract: Path) -> None:
    locked = pdf_factory.encrypted_pdf(contract, user_password="s3cret", owner_password="owner")
    with pytest.raises(WrongPasswordError, match="password"):
        parse_pdf(locked, password="guess")
    with pytest.raises(DamagedPdfError):
        parse_pdf(pdf_factory.garbage_pdf(contract.parent))


def test_an_unexpected_error_in_the_child_is_a_damaged_pdf(tmp_path: Path) -> None:
    with pytest.raises(DamagedPdfError, match="damaged"):
        _run_child(tmp_path / "vanished.pdf", None, ParseLimits())


def test_a_slow_pdf_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    slow = pdf_factory.heavy_page_pdf(tmp_path, num_operators=3_000_000)
    started = time.monotonic()
    with pytest.raises(ParseTimeoutError, match="1 seconds"):
        parse_pdf(slow, limits=ParseLimits(timeout_s=1.0))
    assert time.monotonic() - started < 5


def test_a_pdf_needing_too_much_memory_is_stopped(contract: Path) -> None:
    limits = ParseLimits(max_memory_mb=100, timeout_s=60)
    assert parse_pdf(contract, limits=limits).num_pages == 3  # the cap leaves room for a plain PDF
    # 3 million text operators inflate to 21 MB of content and far more once pypdf parses them.
    heavy = pdf_factory.heavy_page_pdf(contract.parent, num_operators=3_000_000)
    with pytest.raises(ParseMemoryError, match="100 MB"):
        parse_pdf(heavy, limits=limits)


def _parse_in_daemon(path: Path, results: multiprocessing.Queue) -> None:
    results.put(parse_pdf(path))


@pytest.mark.slow
def test_parse_works_inside_a_daemonic_process(contract: Path) -> None:
    # A Celery prefork worker is a daemonic process: it may start subprocesses, not Processes.
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    worker = context.Process(target=_parse_in_daemon, args=(contract, results), daemon=True)
    worker.start()
    document = results.get(timeout=60)
    worker.join(timeout=10)
    assert isinstance(document, ParsedDocument)
    assert document == parse_pdf_in_process(contract)
