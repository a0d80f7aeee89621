"""Every PDF of the shared corpus is parsed or refused with a DocumentError, as MANIFEST.tsv expects.

Most files are parsed in this process for speed; those in CHILD_FILES go through the child process,
which is what LongDoc runs. A count of outcomes by reason, and the speed, is printed at the end.
"""

from __future__ import annotations

import csv
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
from pipelines.parse import ParseLimits, parse_pdf_outcome

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
FOLDERS = ("legal", "medical", "edge", "edge_extra")
if not (CORPUS / "MANIFEST.tsv").is_file():
    pytest.skip(f"no test corpus at {CORPUS.resolve()}", allow_module_level=True)

LIMITS = ParseLimits()
pytestmark = [pytest.mark.corpus, pytest.mark.timeout(2 * LIMITS.timeout_s)]

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
    pages, seconds = counts.pop("pages", 0), counts.pop("milliseconds", 0) / 1000
    refused = ", ".join(f"{code}: {n}" for code, n in sorted(counts.items()))
    with capture.global_and_fixture_disabled():  # module teardown output is captured otherwise
        reporter.write_line(
            f"corpus: {parsed} parsed ({pages} pages, {pages / max(seconds, 1e-9):.0f} pages/s "
            f"in process), {sum(counts.values())} refused ({refused})"
        )


def _assert_clean(text: str) -> None:
    assert "\n\n\n" not in text and text == text.strip()
    assert all(line == line.strip() and "  " not in line for line in text.split("\n"))
    assert not _LIGATURES & set(text) and "\u00ad" not in text
    assert not [c for c in text if c != "\n" and unicodedata.category(c) == "Cc"]


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_is_parsed_or_refused(name: str, tally: Counter[str]) -> None:
    expected = expected_outcome(name)
    in_child = name in CHILD_FILES
    started = time.perf_counter()
    try:
        outcome = parse_pdf_outcome(CORPUS / name, limits=LIMITS, in_child=in_child)
    except DocumentError as error:
        assert time.perf_counter() - started < LIMITS.timeout_s
        tally[error.code] += 1
        if expected is not None:
            assert not isinstance(expected, int), f"refused ({error.code}), expected to parse"
            assert isinstance(error, expected)
        assert error.message.endswith(".") and "Traceback" not in error.message
        return
    seconds = time.perf_counter() - started
    assert seconds < LIMITS.timeout_s
    document = outcome.document
    tally["parsed"] += 1
    if not in_child:
        tally["pages"] += document.num_pages
        tally["milliseconds"] += round(seconds * 1000)
    assert isinstance(expected, int | None), f"parsed, but {expected.__name__} expected"
    assert document.num_pages > 0 and document.num_chars > 0
    assert expected is None or document.num_pages == expected
    for page in document.pages:
        _assert_clean(page.text)


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
