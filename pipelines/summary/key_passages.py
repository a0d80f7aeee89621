"""Key passages: an extractive summary, the sentences that best cover the document, each quoted
verbatim with its page, in document order. Faithful by construction: nothing is written.

Coverage: sentences are scored by centrality (continuous LexRank, pipelines.summary.centrality) over
TF-IDF similarity, or over sentence embeddings when an Embedder is given. The document is cut
into sections of whole passages (pipelines.sections); the best sentence of every section is
taken first, so a long document is covered end to end, then the best of the rest. The opening
sentence is always taken: it usually says what the document is and who it concerns (a
contract's preamble with its parties and date, an opinion's procedural history, a label's
highlights line). A sentence too like one already taken is passed over while others are left.
How many: 5 to 12, growing with the page count.

Candidates are whole sentences of readable prose: not headings, signature or form lines, tables
of figures or text in capitals.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from pipelines.documents import PageText, Passage
from pipelines.protocols import Embedder
from pipelines.retrieval.bm25 import terms
from pipelines.retrieval.evidence import DocumentSentences, Evidence
from pipelines.retrieval.quotes import sentence_quote
from pipelines.sections import Section, cut_sections, passage_cost
from pipelines.summary.centrality import (
    embedding_similarity,
    lexrank,
    sparse_similarity,
    tfidf_rows,
)

MIN_KEY_PASSAGES, MAX_KEY_PASSAGES = 5, 12
# One key passage per this many pages beyond the minimum.
PAGES_PER_KEY_PASSAGE = 3
# Sections of about this many tokens each hold at least one key passage (more tokens per
# section where the count would exceed MAX_KEY_PASSAGES).
SECTION_TOKENS = 2048
MIN_CHARS, MAX_CHARS = 40, 1200
MIN_TERMS = 5
MIN_LETTER_SHARE = 0.6
MAX_CAPITAL_SHARE = 0.5
# A "sentence" whose words mostly start with a capital is a heading or a caption line.
MAX_TITLE_WORD_SHARE = 0.7
# Cosine above which a sentence repeats one already taken (TF-IDF; embeddings sit higher).
# Repeats are taken only when too few other sentences are left to reach the count.
REDUNDANT_TFIDF, REDUNDANT_EMBEDDING = 0.7, 0.9
_FORM_LINE = re.compile(r"_{3,}|\.{4,}|…{2,}|-{4,}")
# OCR debris ("Busine ss Ope rations Labo rato ries 9 18 6 0 8"): words split into fragments
# and runs of lone digits. A sentence is debris when more than this share of its words are
# fragments of one to three letters that are not common short words, or numbers of one or two
# digits (a year or an amount is not counted).
MAX_DEBRIS_WORD_SHARE = 0.3
MIN_DEBRIS_WORDS = 3
_COMMON_SHORT_WORDS = (
    "a i an as at be by do go he if in is it me my no of on or so to up us we all and any are "
    "but can did due for had has her him his how its may nor not now off one our out own per "
    "put say see set she six ten the too two use via was way who why yes yet you act age art "
    "day end fee few get law let net new pay sum tax top etc inc ltd llc co mr ms dr st vs "
    "am pm id"
)
_SHORT_WORDS = frozenset(_COMMON_SHORT_WORDS.split())
_WORD_CORE = re.compile(r"^\W+|\W+$")


def key_passage_count(num_pages: int) -> int:
    """5 for a short document, one more per 3 pages, at most 12."""
    wanted = MIN_KEY_PASSAGES - 1 + math.ceil(num_pages / PAGES_PER_KEY_PASSAGE)
    return max(MIN_KEY_PASSAGES, min(MAX_KEY_PASSAGES, wanted))


def key_passages(
    pages: Sequence[PageText],
    passages: Sequence[Passage],
    *,
    embedder: Embedder | None = None,
    count: int | None = None,
    section_tokens: int = SECTION_TOKENS,
    sentences: DocumentSentences | None = None,
) -> list[Evidence]:
    """The key passages of a document, in document order (see the module docstring).

    `count` overrides the page-based number; never more than half the candidate sentences (a
    short text is not its own summary). `score` is the sentence's centrality relative to the
    average candidate (1.0 = average).
    """
    sentences = sentences if sentences is not None else DocumentSentences(pages)
    candidates = [span for span in sentences.spans if is_candidate(sentences.text[slice(*span)])]
    if not candidates:
        return []
    wanted = count if count is not None else key_passage_count(len(pages))
    wanted = max(1, min(wanted, math.ceil(len(candidates) / 2)))
    texts = [sentences.text[start:end] for start, end in candidates]
    if embedder is not None:
        # embeddings: [N, D], unit rows
        embeddings = np.asarray(embedder.embed(texts), dtype=np.float64)
        scores = lexrank(embedding_similarity(embeddings), len(texts))

        def similar(i: int, j: int) -> bool:
            return float(embeddings[i] @ embeddings[j]) > REDUNDANT_EMBEDDING

    else:
        vectors = tfidf_rows(texts)
        scores = lexrank(sparse_similarity(vectors), len(texts))
        rows: dict[int, dict[int, float]] = {}

        def similar(i: int, j: int) -> bool:
            a = rows.setdefault(i, vectors.row(i))
            b = rows.setdefault(j, vectors.row(j))
            return sum(w * b.get(col, 0.0) for col, w in a.items()) > REDUNDANT_TFIDF

    sections = key_passage_sections(pages, passages, wanted, section_tokens)
    starts = [section.start_char for section in sections] or [0]
    chosen = _choose(candidates, scores, starts, wanted, similar)
    relative = scores * len(scores)
    return [
        sentence_quote(sentences, passages, candidates[i], float(relative[i]))
        for i in sorted(chosen)
    ]


def is_candidate(sentence: str) -> bool:
    """Whether a sentence is readable prose worth quoting on its own."""
    text = " ".join(sentence.split())
    if not MIN_CHARS <= len(text) <= MAX_CHARS or _FORM_LINE.search(text):
        return False
    letters = [c for c in text if c.isalpha()]
    if len(letters) < MIN_LETTER_SHARE * len(text):
        return False
    if sum(c.isupper() for c in letters) > MAX_CAPITAL_SHARE * len(letters):
        return False
    words = [word for word in text.split() if word[0].isalpha()]
    if sum(word[0].isupper() for word in words) > MAX_TITLE_WORD_SHARE * len(words):
        return False
    return len(terms(text)) >= MIN_TERMS and not looks_like_ocr_debris(text)


def looks_like_ocr_debris(text: str) -> bool:
    """Whether a sentence reads as OCR debris: many of its words are fragments of one to three
    letters that are no common short word ("ss", "Ope"), or lone one- or two-digit numbers
    ("9 18 6 0")."""
    words = [_WORD_CORE.sub("", word) for word in text.split()]
    words = [word for word in words if word]
    debris = sum(
        (word.isdigit() and len(word) <= 2)
        or (word.isalpha() and len(word) <= 3 and word.lower() not in _SHORT_WORDS)
        for word in words
    )
    return debris >= MIN_DEBRIS_WORDS and debris > MAX_DEBRIS_WORD_SHARE * len(words)


def key_passage_sections(
    pages: Sequence[PageText], passages: Sequence[Passage], count: int, section_tokens: int
) -> list[Section]:
    """The sections that each hold a key passage: of about `section_tokens` tokens, or larger
    so that there are at most `count` of them; none for a document without passages."""
    if not passages:
        return []
    total = sum(passage_cost(passage) for passage in passages)
    budget = max(section_tokens, math.ceil(total / count))
    while True:
        sections = cut_sections(pages, passages, budget)
        if len(sections) <= count:
            return sections
        budget = math.ceil(budget * 1.25)


def _choose(
    candidates: Sequence[tuple[int, int]],
    scores: np.ndarray,
    section_starts: Sequence[int],
    wanted: int,
    similar: Callable[[int, int], bool],
) -> list[int]:
    """Indexes of the chosen candidates: the opening one, each other section's best, then the
    best of the rest."""
    # Highest score first; ties in document order.
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i][0]))
    section_of = [
        max(0, np.searchsorted(section_starts, start, side="right") - 1) for start, _ in candidates
    ]
    chosen: list[int] = [min(range(len(candidates)), key=lambda i: candidates[i][0])]

    def fits(i: int) -> bool:
        return not any(similar(i, j) for j in chosen)

    for section in range(len(section_starts)):
        if any(section_of[j] == section for j in chosen):
            continue
        inside = [i for i in order if section_of[i] == section]
        # The section's best that repeats nothing taken, else its best all the same.
        best = next((i for i in inside if fits(i)), inside[0] if inside else None)
        if best is not None:
            chosen.append(best)
    for allow_repeats in (False, True):
        for i in order:
            if len(chosen) >= wanted:
                return chosen
            if i not in chosen and (allow_repeats or fits(i)):
                chosen.append(i)
    return chosen
