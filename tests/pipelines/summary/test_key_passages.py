"""Key passages: verbatim sentences with their pages, in document order, one from every section,
fast on long documents; TF-IDF by default, embeddings when an Embedder is given."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest

from pipelines.documents import document_text, page_spans
from pipelines.retrieval.bm25 import terms
from pipelines.summary.centrality import lexrank, sparse_similarity, tfidf_rows
from pipelines.summary.key_passages import (
    MAX_KEY_PASSAGES,
    MIN_KEY_PASSAGES,
    is_candidate,
    key_passage_count,
    key_passage_sections,
    key_passages,
)
from tests.pipelines.contract_pdf import contract_document
from tests.pipelines.echo_model import make_document

SUBJECTS = (
    "the licensee pays royalties on net sales every quarter",
    "the licensor may audit the books of the licensee once a year",
    "either party may terminate on material breach after notice and a cure period",
    "confidential information stays secret for five years after termination",
    "the supplier warrants that the goods are free of defects for one year",
    "liability is capped at the fees paid in the twelve months before the claim",
    "disputes go to arbitration before a single arbitrator in the agreed seat",
    "the licensee indemnifies the licensor against claims of third parties",
)


def _page(number: int) -> str:
    """A page of prose about one subject, in several wordings, plus a form line and a heading."""
    subject = SUBJECTS[(number - 1) * len(SUBJECTS) // 30 % len(SUBJECTS)]
    return (
        f"ARTICLE {number} GENERAL TERMS\n\n"
        f"Under this agreement {subject}, as set out on page {number}. "
        f"The parties agree that {subject} and record it in writing. "
        f"It is further agreed that {subject} unless both parties sign a change. "
        f"For clarity, on this page {number} the rule is that {subject}.\n\n"
        "Signature: ______________________"
    )


def _assert_verbatim_on_their_pages(document, found) -> None:
    text = document_text(document.pages)
    bounds = {number: (start, end) for number, start, end in page_spans(document.pages)}
    for quote in found:
        assert text[quote.start_char : quote.end_char] == quote.text
        start, end = bounds[quote.page]
        assert start <= quote.start_char < end


def test_key_passages_are_verbatim_in_document_order_and_cover_every_section(tmp_path) -> None:
    document = contract_document(tmp_path, num_pages=25, law_page=17)
    started = time.perf_counter()
    found = key_passages(document.pages, document.passages, section_tokens=200)
    seconds = time.perf_counter() - started

    assert seconds < 10, f"{seconds:.1f} s for 25 pages"  # about 0.05 s on a free core
    assert len(found) == key_passage_count(25) == MAX_KEY_PASSAGES
    _assert_verbatim_on_their_pages(document, found)
    assert [q.start_char for q in found] == sorted(q.start_char for q in found)
    sections = key_passage_sections(document.pages, document.passages, len(found), 200)
    assert len(sections) > 3
    for section in sections:
        assert any(section.start_char <= q.start_char < section.end_char for q in found), (
            f"no key passage on pages {section.first_page}-{section.last_page}"
        )
    # The opening sentence names the parties and the date.
    assert found[0].start_char == 0 and "Quillfeather Mills" in found[0].text


def test_a_long_document_is_covered_end_to_end_quickly() -> None:
    document = make_document([_page(n) for n in range(1, 301)], kind="legal", max_tokens=60)
    started = time.perf_counter()
    found = key_passages(document.pages, document.passages)
    seconds = time.perf_counter() - started

    assert seconds < 30, f"{seconds:.1f} s for 300 pages"  # about 1 s on a free core
    assert len(found) == MAX_KEY_PASSAGES
    _assert_verbatim_on_their_pages(document, found)
    pages = [q.page for q in found]
    assert pages[0] == 1 and pages[-1] > 250  # beginning to end
    # Headings and form lines are never key passages; distinct subjects are preferred.
    assert not any("ARTICLE" in q.text or "____" in q.text for q in found)
    subjects = {next(s for s in SUBJECTS if s in q.text) for q in found}
    assert len(subjects) == len(SUBJECTS)


def test_a_short_document_gives_the_minimum_and_never_half_its_sentences() -> None:
    assert key_passage_count(1) == MIN_KEY_PASSAGES
    document = make_document([_page(1), _page(2)], max_tokens=60)
    found = key_passages(document.pages, document.passages)
    assert 1 <= len(found) <= 4  # eight candidate sentences
    assert key_passages(document.pages, ()) != []  # no passages: one section, still quoted
    empty = make_document(["Signature: ________"], max_tokens=60)
    assert key_passages(empty.pages, empty.passages) == []


def test_candidates_are_readable_prose() -> None:
    assert is_candidate(
        "The licensee pays royalties on net sales within thirty days of each quarter."
    )
    assert not is_candidate("ARTICLE 7 GENERAL TERMS AND CONDITIONS OF THE LICENSE")
    assert not is_candidate("Schedule Of Fees For The Licensed Products And Territories")
    assert not is_candidate("Signature: ____________________ Date: ____________")
    assert not is_candidate("12.5 14.7 19.2 22.1 38.0 41.9 55.3 60.0 71.4 80.2 91.7")


def test_lexrank_puts_the_sentence_most_like_the_others_first() -> None:
    texts = [
        "royalties are paid on net sales",
        "royalties on net sales are paid quarterly",
        "net sales royalties are paid to the licensor",
        "the weather in spring is mild",
    ]
    scores = lexrank(sparse_similarity(tfidf_rows(texts)), len(texts))
    assert scores.sum() == pytest.approx(1.0)
    assert int(np.argmin(scores)) == 3


class HashingEmbedder:
    """A real, if crude, Embedder: hashed bag of terms, unit length; no model needed."""

    name = "hashing-test"
    dimension = 64

    def embed(self, texts):
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for term in terms(text):
                rows[i, int(hashlib.md5(term.encode()).hexdigest(), 16) % self.dimension] += 1
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms == 0, 1, norms)


def test_an_embedder_scores_the_sentences_instead_of_tfidf() -> None:
    document = make_document([_page(n) for n in range(1, 31)], kind="legal", max_tokens=60)
    found = key_passages(document.pages, document.passages, embedder=HashingEmbedder())
    assert len(found) == key_passage_count(30)
    _assert_verbatim_on_their_pages(document, found)
    assert [q.start_char for q in found] == sorted(q.start_char for q in found)


DEBRIS = "Busine ss Ope rations Dr.Reddy's Labo rato ries Limited 9 18 6 0 8 16 2"


def test_ocr_debris_is_never_a_key_passage() -> None:
    assert not is_candidate(DEBRIS)
    assert not is_candidate(f"The Company reports on its {DEBRIS} in this annual report.")
    # Prose with short words, numbers and abbreviations stays a candidate.
    for prose in (
        "The tenant shall pay the rent of 900 dollars on the 1st day of each month to the owner.",
        "Dr. Reddy's Laboratories Limited sold 12 products in 2019 and 14 in 2020, up by 2.",
        "Under Section 4(a) of the Act, the fee is due by the end of the year and is not refunded.",
    ):
        assert is_candidate(prose), prose
    # In a document where the debris is repeated (as a running header would be), it is not
    # chosen, while the prose around it is.
    pages = [
        f"{DEBRIS}. {SUBJECTS[i].capitalize()}, as the parties agreed in writing on this page. "
        f"It is further agreed that {SUBJECTS[i]} unless both parties sign a change."
        for i in range(6)
    ]
    document = make_document(pages, max_tokens=120)
    found = key_passages(document.pages, document.passages)
    assert found and not any("rato ries" in quote.text for quote in found)
