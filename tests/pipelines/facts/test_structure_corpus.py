"""The structure readers on the shared corpus's labels and opinions, checked only by what holds
for any document of the genre, never by a document's values: a label whose first page has a
"WARNING: ..." heading in capitals has a boxed warning quoted from page 1; a label with an
INDICATIONS AND USAGE (or Drug Facts "Uses") heading has indications quoted from under it; an
opinion whose first page has a "v." caption has parties with roles, a docket number from
page 1 and a disposition from its last pages."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pipelines.facts.caption import read_caption
from pipelines.facts.conclusion import read_disposition
from pipelines.facts.label_sections import read_label
from pipelines.ingest.parse import parse_pdf_in_process
from pipelines.retrieval.evidence import DocumentSentences

CORPUS = Path(
    os.environ.get("LONGDOC_TEST_CORPUS")
    or Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
)
if not (CORPUS / "MANIFEST.tsv").is_file():
    pytest.skip(f"no test corpus at {CORPUS.resolve()}", allow_module_level=True)

pytestmark = pytest.mark.corpus
LABELS = sorted((CORPUS / "medical").glob("fda_*.pdf"))
OPINIONS = sorted((CORPUS / "legal").glob("court_*.pdf"))


def _read(path: Path) -> DocumentSentences:
    return DocumentSentences(parse_pdf_in_process(path).pages)


def _quoted(sentences: DocumentSentences, found) -> str:
    start, end = found.spans[0]
    return sentences.text[start:end]


@pytest.mark.parametrize("path", LABELS, ids=lambda p: p.name)
def test_a_labels_fields_stand_under_their_headings(path) -> None:
    sentences = _read(path)
    found = read_label(sentences)
    first_page = sentences.pages[0].text
    if re.search(r"(?m)^WARNING:\s*[A-Z]", first_page):
        boxed = found["boxed_warning"]
        assert boxed.origin.endswith("p. 1") and _quoted(sentences, boxed).startswith("WARNING")
    else:
        assert "boxed_warning" not in found
    if re.search(r"(?m)^(?:\d+\s+)?INDICATIONS AND USAGE$|^Uses$", sentences.text):
        quote = _quoted(sentences, found["indications"])
        assert re.match(r"(?:\d+\s+)?INDICATIONS AND USAGE|Uses", quote)
    for name in ("dosage", "contraindications", "warnings", "drug_name"):
        assert found[name].value and found[name].spans, name
    for row in found["dosage"].table:  # a dose row quotes an amount from its own page
        quote = sentences.text[row["start_char"] : row["end_char"]]
        assert re.search(r"\d", quote) and sentences.page_of(row["start_char"]) == row["page"]


@pytest.mark.parametrize("path", OPINIONS, ids=lambda p: p.name)
def test_an_opinions_caption_gives_parties_with_roles_and_its_number(path) -> None:
    sentences = _read(path)
    found = read_caption(sentences)
    assert found["case_parties"].origin == "caption, p. 1"
    assert re.search(
        r"\((?:plaintiff|defendant|appellant|appellee|petitioner|respondent)",
        found["parties"].value,
    )
    docket = found["docket_number"]
    assert docket.origin == "caption, p. 1" and docket.value in sentences.pages[0].text
    disposition = read_disposition(sentences)
    assert disposition is not None
    assert sentences.page_of(disposition.spans[0][0]) > len(sentences.pages) // 2
