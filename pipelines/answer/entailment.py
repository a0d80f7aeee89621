"""Lexical entailment: is what an answer says beyond the question said by one or two quotes?

No entailment or cross-encoder model ships in a PyPI package that runs here, so the test is
lexical: the answer's content words (BM25 stems) that the question does not already hold must
all occur in one quote, or in two together, with no negation flipped between them ("is not
renewed" against "is renewed"). A stem is the unit, so "terminated" covers "termination".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from pipelines.answer.rejections import NEGATION
from pipelines.citations import remove_citations
from pipelines.retrieval.bm25 import terms

# Stems that frame an answer without stating anything: "The document states that ...".
FRAME_STEMS = frozenset(
    terms(
        "document documents agreement contract says said states stated provides provided "
        "according answer question quote quoted page pages sources source also"
    )
)
# At most this many quotes (best first) are tried in pairs.
MAX_PAIRED_QUOTES = 6


@dataclass(frozen=True)
class Cover:
    share: float  # of the answer's new stems that the quotes hold, 0..1
    quotes: tuple[int, ...]  # the one or two quotes that hold them, by index
    sharing: tuple[int, ...]  # those first, then every other quote holding a new stem
    missing: tuple[str, ...]  # the stems they do not hold
    flipped: bool  # the answer negates what the quotes state, or the other way round


def new_stems(answer: str, question: str) -> set[str]:
    """The answer's content stems that neither the question nor a framing phrase holds."""
    return set(terms(remove_citations(answer))) - set(terms(question)) - FRAME_STEMS


def cover(answer: str, question: str, quotes: Sequence[str]) -> Cover | None:
    """How far one or two of `quotes` hold the answer's new stems; None when the answer has
    none (it says nothing the question does not)."""
    needed = new_stems(answer, question)
    if not needed:
        return None
    stems = [set(terms(quote)) for quote in quotes]
    candidates: list[tuple[int, ...]] = [(i,) for i in range(len(quotes))]
    candidates += list(combinations(range(min(len(quotes), MAX_PAIRED_QUOTES)), 2))
    best: tuple[int, ...] = ()
    best_held: set[str] = set()
    for chosen in candidates:
        held = needed & set().union(*(stems[i] for i in chosen))
        # More held wins; on a tie, fewer quotes.
        if len(held) > len(best_held) or (len(held) == len(best_held) and len(chosen) < len(best)):
            best, best_held = chosen, held
    if not best_held:
        return Cover(0.0, (), (), tuple(sorted(needed)), False)
    sharing = best + tuple(i for i in range(len(quotes)) if i not in best and needed & stems[i])
    negated = NEGATION.search(remove_citations(answer)) is not None
    quoted_negated = any(NEGATION.search(quotes[i]) is not None for i in best)
    return Cover(
        share=len(best_held) / len(needed),
        quotes=best,
        sharing=sharing,
        missing=tuple(sorted(needed - best_held)),
        flipped=negated != quoted_negated,
    )
