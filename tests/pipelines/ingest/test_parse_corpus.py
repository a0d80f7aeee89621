"""Every PDF of the shared corpus is parsed or refused with a DocumentError, as MANIFEST.tsv expects.

Most files are parsed in this process for speed; those in CHILD_FILES go through the child process,
which is what LongDoc runs. A count of outcomes by reason, and the speed, is printed at the end.

Files the manifest marks NO_TEXT (a scan, or under 20 characters a page in pypdf) are now read by
OCR where their pages hold images: each is either stored, with at least one page OCR'd and its
confidence, or refused with NoTextLayerError "even with OCR" (photos, drawings, blank or tiny
pages: nothing to read). The count of each is printed and at least MIN_SCANS_STORED must be
stored. Text documents with scanned pages among them (an appendix, an exhibit) keep those
pages now, OCR'd: the count of documents with OCR'd pages is printed too. LONGDOC_TEST_CORPUS points at the corpus from a worktree elsewhere.
"""

from __future__ import annotations

import csv
import os
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.errors import (
    DamagedPdfError,
    DocumentError,
    NoTextLayerError,
    PasswordRequiredError,
    WrongPasswordError,
)
from pipelines.ingest.limits import ParseLimits
from pipelines.ingest.parse import parse_pdf_outcome
from pipelines.ingest.parse_child import OCR_PAGE_GRACE_S

CORPUS = Path(
    os.environ.get("LONGDOC_TEST_CORPUS")
    or Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
)
FOLDERS = ("legal", "medical", "edge", "edge_extra")
if not (CORPUS / "MANIFEST.tsv").is_file():
    pytest.skip(f"no test corpus at {CORPUS.resolve()}", allow_module_level=True)

LIMITS = ParseLimits()
# A file's time: LIMITS.timeout_s, and each page OCR reads its own limit (pipelines/ingest/parse_child.py).
OCR_PAGE_S = LIMITS.sources.ocr_page_timeout_s + OCR_PAGE_GRACE_S
pytestmark = [pytest.mark.corpus, pytest.mark.timeout(4 * LIMITS.timeout_s + 4 * OCR_PAGE_S)]

# User (and owner) passwords from the corpus README.
PASSWORDS = {
    "edge/005-libreoffice-writer-password__libreoffice-writer-password.pdf": "openpassword",
    "edge_extra/pypdf_encryption_r2-user-password.pdf": "asdfzxcv",
    "edge_extra/pypdf_encryption_r3-user-password.pdf": "asdfzxcv",
    "edge_extra/pypdf_encryption_r4-aes-user-password.pdf": "asdfzxcv",
    "edge_extra/pypdf_encryption_r5-user-password.pdf": "asdfzxcv",
    "edge_extra/pypdf_encryption_r6-user-password.pdf": "asdfzxcv",
    "edge_extra/pypdf_encryption_r6-both-passwords.pdf": "foo",
    "edge_extra/pypdf_crazyones-encrypted-256.pdf": "password",
}
OWNER_PASSWORDS = {
    "edge_extra/pypdf_encryption_r6-both-passwords.pdf": "bar",
    "edge_extra/pypdf_encryption_r2-owner-password.pdf": "asdfzxcv",
}
UNKNOWN_PASSWORD = "edge_extra/pypdf_encrypted-file.pdf"
CHILD_FILES = {
    "edge/017-unreadable-meta-data__unreadablemetadata.pdf",
    "edge/007-imagemagick-images__imagemagick-CCITTFaxDecode.pdf",
    "edge/009-pdflatex-geotopo__GeoTopo-komprimiert.pdf",
    "edge_extra/pypdf_encryption_r6-both-passwords.pdf",
    UNKNOWN_PASSWORD,
    "legal/cuad_train_01_service_gpaq.pdf",
    "medical/fda_label_metformin_er_2025.pdf",
}
# The scanned files of the corpus with text to read (one, in 2026-12: a patent's scanned page).
MIN_SCANS_STORED = 1
_OPENED_WITH_RE = re.compile(r"ENCRYPTED\(opened with pw='([^']*)'\)")
_LIGATURES = set("ﬀﬁﬂﬃﬄﬅﬆ")


def _manifest() -> dict[str, dict[str, str]]:
    with (CORPUS / "MANIFEST.tsv").open(newline="", encoding="utf-8") as file:
        return {row["file"]: row for row in csv.DictReader(file, delimiter="\t")}


MANIFEST = _manifest()
FILES = sorted(
    path.relative_to(CORPUS).as_posix()
    for folder in FOLDERS
    for path in (CORPUS / folder).glob("*.pdf")
)


def expected_outcome(name: str) -> type[DocumentError] | int | None:
    """The error the file must be refused with, or its page count; None when unlisted."""
    row = MANIFEST.get(name)
    if row is None:
        return None
    check = row["check"]
    opened_with = _OPENED_WITH_RE.search(check)
    if name == UNKNOWN_PASSWORD:
        return PasswordRequiredError
    if "PYPDF_ERROR" in check:
        return DamagedPdfError
    if "NO_TEXT" in check:
        return NoTextLayerError
    if opened_with and opened_with.group(1):
        return PasswordRequiredError
    return int(row["pages"])


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Counter[str]]:
    """Outcomes by reason, printed on pytest's terminal when the module ends (never document text)."""
    counts: Counter[str] = Counter()
    yield counts
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not counts:
        return
    parsed = counts.pop("parsed", 0)
    scans = counts.pop("scans_stored", 0), counts.pop("ocr_pages", 0)
    counts.pop("no_text_files", 0)
    with_ocr = counts.pop("documents_with_ocr", 0), counts.pop("ocr_pages_all", 0)
    pages, seconds = counts.pop("pages", 0), counts.pop("milliseconds", 0) / 1000
    refused = ", ".join(f"{code}: {n}" for code, n in sorted(counts.items()))
    with capture.global_and_fixture_disabled():  # module teardown output is captured otherwise
        reporter.write_line(
            f"corpus: {parsed} parsed ({pages} pages, {pages / max(seconds, 1e-9):.0f} pages/s "
            f"in process), {sum(counts.values())} refused ({refused}); NO_TEXT files stored by "
            f"OCR: {scans[0]} ({scans[1]} pages OCR'd); all documents with OCR'd pages: "
            f"{with_ocr[0]} ({with_ocr[1]} pages)"
        )


def _assert_clean(text: str) -> None:
    assert "\n\n\n" not in text and text == text.strip()
    assert all(line == line.strip() and "  " not in line for line in text.split("\n"))
    assert not _LIGATURES & set(text) and "\u00ad" not in text
    assert not [c for c in text if c != "\n" and unicodedata.category(c) == "Cc"]


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_is_parsed_or_refused(name: str, tally: Counter[str]) -> None:
    expected = expected_outcome(name)
    # NO_TEXT files go through OCR: in the child, under its caps and per-page limits.
    in_child = name in CHILD_FILES or expected is NoTextLayerError
    started = time.perf_counter()
    tally["no_text_files"] += expected is NoTextLayerError
    try:
        outcome = parse_pdf_outcome(CORPUS / name, limits=LIMITS, in_child=in_child)
    except DocumentError as error:
        assert time.perf_counter() - started < LIMITS.timeout_s
        tally[error.code] += 1
        if expected is not None:
            assert not isinstance(expected, int), f"refused ({error.code}), expected to parse"
            assert isinstance(error, expected)
        if expected is NoTextLayerError:
            assert "even with OCR" in error.message
        assert error.message.endswith(".") and "Traceback" not in error.message
        return
    seconds = time.perf_counter() - started
    document = outcome.document
    assert seconds < LIMITS.timeout_s + len(document.ocr_pages) * OCR_PAGE_S
    tally["parsed"] += 1
    if document.ocr_pages:
        tally["documents_with_ocr"] += 1
        tally["ocr_pages_all"] += len(document.ocr_pages)
    if not in_child and not document.ocr_pages:  # pypdf's speed, not OCR's
        tally["pages"] += document.num_pages
        tally["milliseconds"] += round(seconds * 1000)
    assert document.num_pages > 0 and document.num_chars > 0
    if expected is NoTextLayerError:  # a scan that OCR reads
        assert document.ocr_pages, "a NO_TEXT file stored without OCR"
        assert document.num_pages == int(MANIFEST[name]["pages"])
        for page in document.pages:
            is_ocr = page.source == "ocr"
            assert (page.ocr_confidence is not None) == is_ocr
            assert not is_ocr or 0 < page.ocr_confidence <= 1
        tally["scans_stored"] += 1
        tally["ocr_pages"] += len(document.ocr_pages)
    else:
        assert isinstance(expected, int | None), f"parsed, but {expected.__name__} expected"
        assert expected is None or document.num_pages == expected
    for page in document.pages:
        _assert_clean(page.text)


def test_the_scans_with_text_are_stored(tally: Counter[str]) -> None:
    """After the files above: the NO_TEXT files OCR reads are stored (with the module only)."""
    num_no_text = sum(expected_outcome(name) is NoTextLayerError for name in FILES)
    if tally["no_text_files"] < num_no_text:
        pytest.skip("runs after every file of test_corpus_file_is_parsed_or_refused")
    assert tally["scans_stored"] >= MIN_SCANS_STORED


@pytest.mark.parametrize(
    ("name", "password"), sorted(PASSWORDS.items()) + sorted(OWNER_PASSWORDS.items())
)
def test_known_passwords_open_the_encrypted_files(name: str, password: str) -> None:
    in_child = name in CHILD_FILES
    outcome = parse_pdf_outcome(CORPUS / name, password=password, in_child=in_child)
    assert outcome.document.was_encrypted
    assert outcome.document.num_pages == int(MANIFEST[name]["pages"])
    if expected_outcome(name) is PasswordRequiredError:
        with pytest.raises(WrongPasswordError):
            parse_pdf_outcome(CORPUS / name, password=password + "-wrong", in_child=in_child)


def test_the_file_with_an_unknown_password_is_refused_both_ways() -> None:
    path = CORPUS / UNKNOWN_PASSWORD
    with pytest.raises(PasswordRequiredError, match="password"):
        parse_pdf_outcome(path)
    with pytest.raises(WrongPasswordError):
        parse_pdf_outcome(path, password="openpassword")
