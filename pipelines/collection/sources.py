"""The documents of a collection question as the pipelines see them, and "[Title, p. N]"
citations: each document gets a short label, unique in the question, that names it in the
prompt's page markers, in the model's citations and in ours."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelines.documents import Passage
from pipelines.inputs import DocumentInput
from pipelines.prompts.collection import cite
from pipelines.retrieval.evidence import DocumentSentences, Evidence
from pipelines.retrieval.ranking import PassageRanker

MAX_LABEL_CHARS = 80
_MARKER_LINE = re.compile(r"^\[p\. (\d+)\]$", re.MULTILINE)
# "[Master Services Agreement, p. 14]", "[Lease, pp. 3-4]"; the label holds no brackets.
_CITATION = re.compile(r"\[([^\[\]\n]{1,120}?),\s*pp?\.\s*(\d+)(?:\s*[-–—]\s*(\d+))?\]", re.I)


@dataclass(frozen=True)
class SourceDocument:
    """One document of the collection: its id, its label, its text, and what else is known."""

    document_id: int
    label: str
    document: DocumentInput
    index: PassageRanker | None = None  # ranks its passages (BM25, or hybrid); None: BM25
    facts: tuple = field(default=())  # pipelines.answer.from_facts.KnownFact
    _sentences: list = field(default_factory=list, compare=False, repr=False)

    @property
    def sentences(self) -> DocumentSentences:
        if not self._sentences:
            self._sentences.append(DocumentSentences(self.document.pages))
        return self._sentences[0]


@dataclass(frozen=True)
class CitedPage:
    document_id: int
    label: str
    page: int


@dataclass(frozen=True)
class SourceQuote:
    document_id: int
    label: str
    evidence: Evidence


def labels_for(titles: Sequence[tuple[int, str | None, str]]) -> dict[int, str]:
    """(document id, title, file name) -> a label each: the title (else the file name), cut to
    MAX_LABEL_CHARS, brackets and commas that would break a citation removed, "(#id)" added
    where two would read the same."""
    raw = {}
    for document_id, title, file_name in titles:
        name = " ".join((title or file_name or f"Document {document_id}").split())
        name = re.sub(r"[\[\]]", "", name).replace(",", " ")
        raw[document_id] = " ".join(name.split())[:MAX_LABEL_CHARS].strip() or str(document_id)
    counts: dict[str, int] = {}
    for label in raw.values():
        counts[label.lower()] = counts.get(label.lower(), 0) + 1
    return {
        i: label if counts[label.lower()] == 1 else f"{label} (#{i})" for i, label in raw.items()
    }


def label_markers(block: str, label: str) -> str:
    """A rendered block's "[p. N]" page markers as "[Label, p. N]"."""
    return _MARKER_LINE.sub(lambda m: f"[{label}, p. {m.group(1)}]", block)


def parse_source_citations(
    text: str, allowed: dict[str, tuple[int, set[int]]]
) -> tuple[list[CitedPage], int]:
    """The citations of `text` that name a known label (case and spacing aside) and one of its
    allowed pages, in order, without repeats; and how many citations did not.
    `allowed`: label -> (document id, pages)."""
    by_key = {" ".join(label.lower().split()): label for label in allowed}
    cited: list[CitedPage] = []
    num_invalid = 0
    for match in _CITATION.finditer(text):
        label = by_key.get(" ".join(match.group(1).lower().split()))
        first = int(match.group(2))
        last = int(match.group(3)) if match.group(3) else first
        if label is None:
            num_invalid += 1
            continue
        document_id, pages = allowed[label]
        valid = [page for page in range(first, min(last, first + 50) + 1) if page in pages]
        if not valid:
            num_invalid += 1
        for page in valid:
            found = CitedPage(document_id, label, page)
            if found not in cited:
                cited.append(found)
    return cited, num_invalid


def remove_source_citations(text: str) -> str:
    """`text` with each "[Label, p. N]" blanked out by as many spaces (offsets unchanged): the
    labels are names the support check would look for in the text."""
    return _CITATION.sub(lambda match: " " * len(match.group(0)), text)


def sources_line(cited: Sequence[CitedPage]) -> str:
    return "Sources: " + ", ".join(cite(c.label, c.page) for c in cited)


def pages_of(passage: Passage) -> range:
    return range(passage.first_page, passage.last_page + 1)
