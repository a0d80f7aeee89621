"""What a question names beyond the kind of thing it asks for: its specifics.

"What is the usual adult dose for a mild or moderate ear, nose or throat infection?" asks for a
dose, and names a population, a severity and an infection: a sentence that gives some other
dose (the highlights' general adult range, a dose for children) states a dose in the dose's
role and still does not answer it. The same holds for a stored key fact: the label's dosage
fact answers "What is the dose?", not "How often should a patient whose GFR is below 10
mL/min take it?".

The specifics are the question's content words (pipelines.retrieval.bm25.terms: lower case,
stemmed) less question words, function words and the words that name a document, a genre's
parties or the field itself ("dose", "judges"); a text covers them when it holds enough of
them. Only ordinary English and the genres' common nouns are listed, no word of any one
document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipelines.retrieval.bm25 import terms

# A question naming at least this many specifics must have this share of them in a text for
# the text to answer it.
MIN_SPECIFICS = 2
MIN_SHARE = 0.5
_FUNCTION_WORDS = (
    "what which who whom whose whos when where why how is are was were be been being do does did "
    "done should shall must may might can could would will the a an of to in on for with at by "
    "from into about as and or nor not no it its it's this that these those there their them "
    "they he she his her him any all some much many often each per if whether than then also "
    "only just ever there here so such own same other others else besides"
)
# Words any question of a genre may use without naming anything in particular.
_GENRE_WORDS = (
    "document label labels drug drugs medicine medicines medication medications product products "
    "patient patients person people someone take takes taken taking give gives given use uses "
    "used using say says said state states stated tell list name named agreement contract "
    "lease license licence party parties case court opinion appeal decision clause section "
    "page pages provision provisions term terms"
)
_GENERIC = frozenset(terms(_FUNCTION_WORDS)) | frozenset(terms(_GENRE_WORDS))
# Comparisons written in several ways ("below 10", "less than 10", "< 10") read as one word.
_COMPARISONS = (
    (
        re.compile(r"(?:\bless|\bfewer|\blower)\s+than\b|\bbelow\b|\bunder\b|<(?!=)", re.I),
        " lessthan ",
    ),
    (
        re.compile(
            r"(?:\bmore|\bgreater|\bhigher)\s+than\b|\babove\b|\bover\b|\bexceeding\b|>(?!=)", re.I
        ),
        " morethan ",
    ),
)


def _terms(text: str) -> list[str]:
    for pattern, word in _COMPARISONS:
        text = pattern.sub(word, text)
    return terms(text)


def specifics(question: str, *, also_generic: Iterable[str] = ()) -> set[str]:
    """The question's specifics; `also_generic`: text whose words do not count (the words of
    the cue that matched, the field's name)."""
    ignored = _GENERIC | set(terms(" ".join(also_generic)))
    return {term for term in _terms(question) if term not in ignored}


def covers(wanted: set[str], text: str, *, min_share: float = MIN_SHARE) -> bool:
    """Whether `text` holds enough of `wanted` (always true below MIN_SPECIFICS of them)."""
    if len(wanted) < MIN_SPECIFICS:
        return True
    return len(held_of(wanted, text)) / len(wanted) >= min_share


def held_of(wanted: set[str], text: str) -> set[str]:
    """The specifics in `wanted` that `text` holds."""
    return wanted & set(_terms(text))
