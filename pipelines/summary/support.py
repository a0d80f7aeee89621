"""Every sentence of a model's summary against the document: the sentences it rests on, each
with its page, and whether it states anything the document does not.

A lawyer or a clinician reads a summary to decide what to read; a sentence they cannot trace
back is worth nothing to them, and one that names a party, a date or a dose the document does
not hold is worse. The answers' support check (pipelines.answer.check) does this for one answer;
here it runs per sentence of the summary:

1. the passages closest to the sentence (BM25, fused with the passage embeddings where the
   document has them), then the one or two document sentences in them that match it best
   (pipelines.retrieval.evidence, by meaning too with an embedder): its quotes;
2. every name, number, date and place the sentence states is looked up in its quotes, then in
   the document (pipelines.answer.support): one found nowhere makes the sentence "unsupported";
3. otherwise the sentence is "supported" when its quotes carry its content: at least
   MIN_TERM_SHARE of its content words (BM25 stems, the words a summary says about the
   document itself aside), or, with an embedder, a cosine of at least MIN_COSINE with its best
   quote. Else it is "no_evidence": nothing false found, but nothing to check it against.

A sentence that repeats the prompt never gets here: pipelines.summary.summarize drops it from
the model's text first (pipelines.prompts.echo), so it is neither checked nor stored.

The summary shown puts the page of its best quote after each supported sentence and sets the
others apart, so every sentence a reader takes from it can be checked on a cited page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipelines.answer.support import FactIndex, check_support
from pipelines.citations import remove_citations
from pipelines.documents import Passage
from pipelines.ingest.sentences import split_sentences
from pipelines.protocols import Embedder
from pipelines.repetition import WORD, is_looping
from pipelines.retrieval.bm25 import PassageIndex, terms
from pipelines.retrieval.evidence import DocumentSentences, Evidence, sentence_evidence
from pipelines.retrieval.ranking import PassageRanker

SUPPORTED, UNSUPPORTED, NO_EVIDENCE = "supported", "unsupported", "no_evidence"
# Share of a summary sentence's content words that its quotes must hold (without an embedder
# the only test; with one, either test will do).
MIN_TERM_SHARE = 0.5
# Cosine of the sentence's and its best quote's embeddings (all-MiniLM-L6-v2: a paraphrase that
# shares a word or two with its sentence scores 0.62-0.75 against it; a sentence of the same
# document and register that says something else scores up to about 0.65-0.69, so the bar sits
# above the loosest paraphrases rather than let those through).
MIN_COSINE = 0.7
NUM_PASSAGES = 4
NUM_QUOTES = 2
# Shorter than this (a heading, "In summary:") is no sentence to check.
MIN_SENTENCE_CHARS = 20
# A line without a sentence's closing mark and with fewer words than this, or with most of its
# words capitalized, is a heading, a name or a form line ("A Delaware corporation", "Signature
# Page to Trademark License Agreement", "By: Name:"), not a statement: a small model that copies
# a signature block writes nothing but these.
MIN_UNPUNCTUATED_WORDS = 5
MAX_UNPUNCTUATED_CAPITALIZED = 0.6
# The same in capitals is a heading or a name even when it ends with a full stop ("... INC.").
MIN_CAPITALS_WORDS = 7
_CLOSING = re.compile(r"""[.!?;]["')\]’”]*$""")
_SPACE_BEFORE_MARK = re.compile(r"\s+([.,;:!?])")
# Words with which a summary speaks of the document rather than from it.
_META_TERMS = frozenset(
    terms(
        "document documents summary summarizes summarized text covers discusses describes "
        "outlines addresses concerns mentions section sections page pages overall also"
    )
)
# "Pages 4-9:" section labels that a combined summary may keep.
_PAGE_LABEL = re.compile(r"^\s*pages?\s+\d+(?:\s*[-–]\s*\d+)?\s*:\s*", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")


@dataclass(frozen=True)
class SentenceSupport:
    """One sentence of the summary, as the model wrote it, with its verdict and quotes."""

    text: str
    status: str  # SUPPORTED | UNSUPPORTED | NO_EVIDENCE
    quotes: list[Evidence]
    missing: list[str] = field(default_factory=list)  # claims found nowhere in the document
    term_share: float = 0.0
    cosine: float | None = None

    @property
    def page(self) -> int | None:
        return self.quotes[0].page if self.quotes else None


def check_summary(
    text: str,
    sentences: DocumentSentences,
    passages: Sequence[Passage],
    *,
    index: PassageRanker | None = None,
    embedder: Embedder | None = None,
) -> list[SentenceSupport]:
    """The summary `text` cut into sentences, each checked against the document (module doc).
    `index` ranks `passages` (hybrid where the caller has the embeddings); `embedder` is the
    one that made them, used for the sentences' meaning too."""
    ranker = index if index is not None else PassageIndex(passages)
    facts = FactIndex(sentences.text)
    checked = []
    for claim in summary_sentences(text):
        query = claim
        wanted = set(terms(query)) - _META_TERMS
        quotes = sentence_evidence(
            ranker.rank(query, NUM_PASSAGES), query, sentences, k=NUM_QUOTES, embedder=embedder
        )
        support = check_support(query, [quote.text for quote in quotes], facts)
        if support.missing:
            missing = [item.text for item in support.missing]
            checked.append(SentenceSupport(claim, UNSUPPORTED, quotes, missing))
            continue
        quoted = set().union(*(terms(quote.text) for quote in quotes)) if quotes else set()
        share = len(wanted & quoted) / len(wanted) if wanted else 0.0
        cosine = _cosine(query, quotes[0], sentences, embedder) if quotes and embedder else None
        close = bool(wanted) and share >= MIN_TERM_SHARE
        if cosine is not None and cosine >= MIN_COSINE:
            close = True
        status = SUPPORTED if quotes and close else NO_EVIDENCE
        checked.append(SentenceSupport(claim, status, quotes, [], round(share, 3), cosine))
    return checked


def summary_sentences(text: str) -> list[str]:
    """The summary's statements, as written, without "Pages 4-9:" labels and without the model's
    own page citations (each sentence is shown with the page of its quote instead). Left out:
    headings, names and other fragments that state nothing (is_statement); a sentence said
    before (the same words, case aside); and a sentence that would make the summary repeat a
    phrase of five words a third time (pipelines.repetition: a decoding loop's copies)."""
    found: list[str] = []
    said: set[tuple[str, ...]] = set()
    # A line break ends a sentence in a summary (paragraphs, list items, section labels).
    for line in text.splitlines():
        line = _BULLET.sub("", _PAGE_LABEL.sub("", line))
        for start, end in split_sentences(line):
            sentence = " ".join(remove_citations(line[start:end]).split())
            sentence = _SPACE_BEFORE_MARK.sub(r"\1", sentence)  # "law [p. 5]." -> "law."
            if not is_statement(sentence):
                continue
            key = tuple(word.casefold() for word in WORD.findall(sentence))
            if key in said or is_looping(" ".join([*found, sentence])):
                continue
            said.add(key)
            found.append(sentence)
    return found


def is_statement(sentence: str) -> bool:
    """Whether a summary's sentence can state something: long enough, and either closed like a
    sentence or long enough to be one (a bullet may end without a full stop), and not a short
    run of capitals (a heading or a party's name copied from a signature block)."""
    if len(sentence) < MIN_SENTENCE_CHARS:
        return False
    words = WORD.findall(sentence)
    if not _CLOSING.search(sentence):
        capitalized = sum(word[0].isupper() for word in words) / max(1, len(words))
        if len(words) < MIN_UNPUNCTUATED_WORDS or capitalized > MAX_UNPUNCTUATED_CAPITALIZED:
            return False
    letters = [char for char in sentence if char.isalpha()]
    return len(words) >= MIN_CAPITALS_WORDS or not all(char.isupper() for char in letters)


def counts(checked: Sequence[SentenceSupport]) -> dict[str, int]:
    """How many sentences have each status (for the summary's stats)."""
    return {
        "num_summary_sentences": len(checked),
        "num_supported_sentences": sum(c.status == SUPPORTED for c in checked),
        "num_unsupported_sentences": sum(c.status == UNSUPPORTED for c in checked),
        "num_sentences_without_evidence": sum(c.status == NO_EVIDENCE for c in checked),
    }


def _cosine(query: str, quote: Evidence, sentences: DocumentSentences, embedder: Embedder) -> float:
    (vector,) = np.asarray(embedder.embed([query]), dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    (quoted,) = sentences.vectors([(quote.start_char, quote.end_char)], embedder)
    return round(float(vector @ quoted) / norm, 3) if norm else 0.0
