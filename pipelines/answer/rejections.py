"""Answers that are no answer, rejected before any check of their meaning: a placeholder left
in ("Paste your answer here", "<the court's name>"), a sentence that says nothing ("the
parties are the parties"), a self-contradiction ("does not say X, but rather X"), text in
quotation marks that the document does not hold, and a statement that the document does not
say (which a quote may show to be wrong: pipelines.answer.check decides).

Every rule reads the answer's own words (BM25 stems, pipelines.retrieval.bm25), never a
document's: they are generic English forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipelines.answer.verbatim import VerbatimIndex, fabricated_quotes
from pipelines.citations import remove_citations
from pipelines.retrieval.bm25 import terms

PLACEHOLDER, TAUTOLOGY, CONTRADICTION, FABRICATED_QUOTE, ECHO = (
    "placeholder",
    "tautology",
    "contradiction",
    "fabricated_quote",
    "echo",
)
# What each rejection says to a person, after "The model's answer ".
REASONS = {
    PLACEHOLDER: "holds a placeholder instead of an answer",
    TAUTOLOGY: "says nothing: it restates its own subject",
    CONTRADICTION: "contradicts itself",
    FABRICATED_QUOTE: "quotes text that is not in the document",
    ECHO: "only repeats the question or its instructions",
}

_PLACEHOLDER = re.compile(
    r"\bpaste\s+(?:your|the)\s+\w+(?:\s+\w+)?\s+here\b"
    r"|\b(?:your|the)\s+(?:answer|response|text)\s+(?:goes\s+)?here\b"
    r"|\[\s*(?:insert|add|enter|your|answer|name|date|placeholder|party|amount)\b"
    r"(?![^\]]*\bpp?\.\s*\d)[^\]]*\]"
    r"|<\s*[a-z][^<>\n]{0,60}>|\{\{[^{}\n]*\}\}|\blorem\s+ipsum\b|\bTBD\b|\bX{3,}\b|_{4,}",
    re.IGNORECASE,
)
# The verb that joins a subject to what is said of it.
_COPULA = re.compile(
    r"\b(?:is|are|was|were|means|mean|refers?\s+to|shall\s+be|will\s+be)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE_BREAK = re.compile(
    r"[;:]|,?\s*\b(?:but|however|whereas|while|although|though|yet|rather\s+than)\b"
    r"|,\s*(?=not\b)",
    re.IGNORECASE,
)
# "No. 12-345" is a docket number, not a negation.
NEGATION = re.compile(
    r"\b(?:not|never|neither|nor|cannot)\b|\bno\b(?!\.\s*\d)|n't\b|n’t\b", re.IGNORECASE
)
# Stems that frame a statement without being part of it: "the document does not say that X,
# but rather that X" states X twice, once negated.
_FRAME_STEMS = frozenset(
    terms(
        "document documents say says said state states stated specify specifies mention "
        "mentions mentioned provide provides rather instead indicate indicates also"
    )
)
# Words the stop list keeps that state nothing: "..., which is the Agreement".
_FUNCTION_STEMS = frozenset(terms("which who whom whose whereby wherein also thus herein hereto"))
# A statement shorter than this (in stems) is too short to call a repetition of another.
MIN_REPEATED_STEMS = 2
_PROMPT_ECHO = re.compile(r"^\s*(?:Question:.*?\n\s*)?Answer:\s*", re.IGNORECASE | re.DOTALL)
_POLAR = re.compile(r"^\W*(?:yes|no)\b", re.IGNORECASE)
_NOT_STATED = re.compile(
    r"\b(?:does|do|did)\s+not\s+(?:say|state|specify|mention|provide|contain|include|"
    r"indicate|address|give|name|list)\b|\b(?:doesn't|don't|didn't|doesn’t|don’t|didn’t)\s+"
    r"(?:say|state|specify|mention|provide|contain|include|indicate|address|give|name|list)\b"
    r"|\bnot\s+(?:stated|specified|mentioned|provided|given|found|addressed|indicated)\b"
    r"|\bno\s+(?:information|mention|answer)\b|\bunable\s+to\s+(?:find|determine)\b"
    r"|\bcannot\s+(?:be\s+)?(?:determined|found|answered)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rejection:
    reason: str  # PLACEHOLDER, TAUTOLOGY, ...
    claims: list[str] = field(default_factory=list)  # the fabricated quotes, if any

    @property
    def sentence(self) -> str:
        return f"The model's answer {REASONS[self.reason]}."


def sentences_of(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def without_prompt_echo(answer: str) -> str:
    """The answer without a copy of the prompt's form before it ("Question: ...? Answer:")."""
    return _PROMPT_ECHO.sub("", answer, count=1)


def has_placeholder(answer: str) -> bool:
    return _PLACEHOLDER.search(answer) is not None


def is_tautology(sentence: str) -> bool:
    """Whether the sentence says of its subject only what the subject already says: "The
    parties to this agreement are the parties to this agreement, which is the Agreement."."""
    copula = _COPULA.search(sentence)
    if copula is None:
        return False
    subject = set(terms(sentence[: copula.start()])) - _FUNCTION_STEMS
    predicate = set(terms(sentence[copula.end() :])) - _FUNCTION_STEMS
    return bool(subject) and bool(predicate) and predicate <= subject


def contradicts_itself(answer: str) -> bool:
    """Whether one statement of the answer is another's negation: "does not say that it is
    governed by X, but rather that it is governed by X"; "not X but X"."""
    clauses = []
    for sentence in sentences_of(answer):
        for clause in _CLAUSE_BREAK.split(sentence):
            stems = set(terms(clause)) - _FRAME_STEMS
            if clause.strip():
                clauses.append((NEGATION.search(clause) is not None, stems))
    for i, (negated, stems) in enumerate(clauses):
        for other_negated, other in clauses[i + 1 :]:
            if negated == other_negated:
                continue
            smaller, larger = sorted((stems, other), key=len)
            if len(smaller) >= MIN_REPEATED_STEMS and smaller <= larger:
                return True
    return False


def only_words_of(answer: str, prompt: str) -> bool:
    """Whether every content word of `answer` (by BM25 stem, citations aside) is in `prompt`."""
    return set(terms(remove_citations(answer))) <= set(terms(prompt))


def says_not_stated(answer: str) -> bool:
    """Whether the answer says the document does not state what was asked."""
    return _NOT_STATED.search(answer) is not None


def rejection(
    answer: str, *, prompt: str | None, document: VerbatimIndex | str
) -> Rejection | None:
    """Why `answer` is no answer, or None. `prompt`: the words of the prompt's task and the
    question (an answer made only of them repeats them); `document`: the document's text."""
    if has_placeholder(answer):
        return Rejection(PLACEHOLDER)
    text = remove_citations(answer)
    if any(is_tautology(sentence) for sentence in sentences_of(text)):
        return Rejection(TAUTOLOGY)
    # "Yes, it renews automatically." answers "Does it renew automatically?" in its words.
    if prompt is not None and not _POLAR.match(text) and only_words_of(text, prompt):
        return Rejection(ECHO)
    made_up = fabricated_quotes(text, document)
    if made_up:
        return Rejection(FABRICATED_QUOTE, made_up)
    if contradicts_itself(text):
        return Rejection(CONTRADICTION)
    return None
