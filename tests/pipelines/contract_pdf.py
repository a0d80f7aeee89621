"""A generated contract PDF (fpdf2) with its parties on page 1 and its governing-law clause on a
page of the caller's choosing, parsed and split by the real pipeline (words count as tokens)."""

from __future__ import annotations

from pathlib import Path

from pipelines.ingest.parse import parse_pdf_in_process
from pipelines.ingest.split import split_into_passages
from pipelines.inputs import DocumentInput
from tests.pipelines import pdf_factory
from tests.pipelines.echo_model import count_words

PARTIES = (
    "This Supply Agreement is made on March 3, 2021 between Quillfeather Mills LLC",
    "and Borrowdale Instruments Inc., together the Parties.",
)
GOVERNING_LAW = (
    "This Agreement shall be governed by and construed in accordance with the",
    "laws of the State of Vermont, without regard to its conflict of laws rules.",
)
CLAUSE = " ".join(GOVERNING_LAW)
TOPICS = (
    "delivery", "inspection", "warranty", "invoicing", "insurance", "audit", "packaging",
    "forecasts", "samples", "records", "training", "recalls",
)  # fmt: skip


def filler_lines(page: int) -> list[str]:
    """A page of plain clauses about its own topic, without places, dates or names."""
    topic = TOPICS[page % len(TOPICS)]
    return [
        f"Section {page}. The supplier shall handle {topic} with reasonable care.",
        f"Any {topic} question is answered in writing within a reasonable time.",
        "",
        f"The buyer may review the {topic} work at its own cost once a year.",
        f"Each party keeps the {topic} records for the period the law requires.",
    ]


def contract_pdf(directory: Path, *, num_pages: int = 4, law_page: int = 3) -> Path:
    pages = []
    for number in range(1, num_pages + 1):
        lines = [*PARTIES, ""] if number == 1 else []
        lines += filler_lines(number)
        if number == law_page:
            lines += ["", *GOVERNING_LAW]
        pages.append("\n".join(lines))
    return pdf_factory.text_pdf(directory, pages, name="supply-agreement.pdf")


def contract_document(
    directory: Path, *, num_pages: int = 4, law_page: int = 3, max_tokens: int = 40
) -> DocumentInput:
    parsed = parse_pdf_in_process(contract_pdf(directory, num_pages=num_pages, law_page=law_page))
    passages = split_into_passages(parsed.pages, count_tokens=count_words, max_tokens=max_tokens)
    return DocumentInput(
        title="Supply Agreement", kind="legal", pages=parsed.pages, passages=tuple(passages)
    )
