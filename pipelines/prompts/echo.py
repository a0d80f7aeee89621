"""Prompt echoes: a model's sentence that gives back our own prompt rather than the document.

A small model asked to summarize often writes its instructions back ("This is one part of a
longer contract.", "Keep the page citations [p. N].", "Do not add facts that are not in the
summaries.") or a placeholder a chat model learnt ("Paste your answer here."). Such a sentence
says nothing about the document, and shown as its summary it tells a reader the opposite of
the truth. Every summary, section summary and answer is cleaned with `drop_prompt_sentences`
before it is combined, checked or stored.

For callers: `overlaps_prompt(sentence, document=None) -> bool` for one sentence, and
`drop_prompt_sentences(text, document=None) -> (text, num_dropped)` for a model's whole text;
`document`, the text the model read, is optional and only spares a sentence the document itself
says (rule 4).

The prompts are every prompt the pipelines send, rendered without a document
(pipelines.prompts.texts). A sentence overlaps them, case, punctuation, page references and
citations aside, when:

1. it is a placeholder ("Paste your answer here", "[Your answer]", "Insert the date here"), or
   a question under our prompts' "Question:" label: the model writing the next turn;
2. it repeats an instruction sentence: the same words ("Cite pages as [p. N]."), or a run of
   MIN_RUN_TERMS of its content words, or a shorter run of at least MIN_SHORT_RUN_TERMS that is
   MIN_RUN_SHARE of them ("Keep page citations.", "This is one part of a longer lease."), or a
   run of MIN_RUN_WORDS words ("It does not include facts that are not in the text."), with at
   least MIN_INSTRUCTION_TERMS content words that are not subject words (below). A key-fact
   field's question is repeated only by its words, or by all its content words and no others:
   its words are the document's too, and "The agreement is governed by the laws of Vermont, the
   state whose law governs it." answers it;
3. it has MIN_ECHO_TERMS or more content words, every one of them a word of one instruction
   prompt (its system and task text together), at least MIN_INSTRUCTION_TERMS of them not
   subject words: "Cover the text with a brief summary of the contract's payment terms."
   A word matches another of its family ("brief", "briefly"; "summary", "summarize");
4. it copies a key-fact field's invented example: MIN_EXAMPLE_TRIGRAM_SHARE of its word trigrams
   in one example sentence and no content word that sentence lacks, unless the document holds
   all its content words: the examples are written in the genre's own words, and a contract may
   say what an example says.

Subject words (pipelines.prompts.texts.subject_words: "court", "parties", "governing law") are
what documents are about: "The court affirmed the dismissal." is made of an opinion prompt's
topic words and is a fine summary sentence; a sentence needs words of the task itself to echo it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from pipelines.citations import remove_citations
from pipelines.ingest.sentences import split_sentences
from pipelines.prompts.texts import EXAMPLE, QUESTION, prompt_texts, subject_words
from pipelines.repetition import WORD
from pipelines.retrieval.bm25 import terms

MIN_RUN_WORDS = 6
MIN_RUN_TERMS = 4
MIN_SHORT_RUN_TERMS = 3
MIN_RUN_SHARE = 0.75
MIN_ECHO_TERMS = 4
MIN_INSTRUCTION_TERMS = 2
MIN_EXAMPLE_TRIGRAM_SHARE = 0.8
# A sentence of fewer word trigrams (a heading such as "INDICATIONS AND USAGE") copies no example.
MIN_EXAMPLE_TRIGRAMS = 3
# Two words are of one family when they share a start of this many letters and the shorter has at
# most MAX_FAMILY_TAIL letters more ("brief"/"briefly"; not "term"/"terminate", "part"/"party").
MIN_FAMILY_PREFIX = 5
MAX_FAMILY_TAIL = 2
# Words that carry no content of their own, on top of the BM25 stop words.
_FUNCTION_WORDS_TEXT = """a about above again all also am an and any are as at be been being below
    both but by can cannot could did didn do does doesn don each either every for from had has
    have having he her here his how i if in into is isn it its itself just may me might more
    most must my neither no nor not of on only or other our out over own same shall she
    should so some such than that the their them then there these they this those to
    too up upon very was we were what when where whether which while who whom
    whose why will with within without would you your"""
_FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())
_PLACEHOLDERS = (
    # "Paste your answer here", "Insert the name of the court here": an order, so it opens the
    # sentence or follows a label ("The type of cover given here" is no placeholder).
    re.compile(
        r"(?:^|:)\W*(?:please\s+)?(?:paste|insert|type|write|enter|fill\s+in)\s+"
        r"(?:[\w'’-]+\s+){0,6}?here\b",
        re.I,
    ),
    # "[Your answer]", "[Insert date]", "<your summary>"
    re.compile(r"[\[<]\s*(?:your|insert|enter|type|paste|write)\b[^\]>\n]{0,60}[\]>]", re.I),
    # "Your answer here", "The summary goes here"
    re.compile(r"\byour\s+(?:answer|summary|response)\s+here\b", re.I),
    re.compile(r"\b(?:answer|summary|response)\s+goes\s+here\b", re.I),
    # A template's slot: "{question}", "{{ answer }}"
    re.compile(r"\{\{?\s*[a-z_]+\s*\}\}?", re.I),
    # "Question: When was the agreement made?": the prompts' own line, the model going on.
    re.compile(r"^\W*question\s*:.*\?\W*$", re.I | re.S),
)
# "[p. N]": the form a prompt asks citations in; the numbers are what remove_citations finds.
_CITATION_FORM = re.compile(r"\[\s*pp?\.\s*N\s*\]")
# "page 3", "pages 4-9", "p. 12": where a section is, which a prompt and its echo differ in.
_PAGE_REFERENCE = re.compile(r"\b(?:pages?|pp?\.)\s*\d+(?:\s*[-–]\s*\d+)?", re.I)
# "Question: ...", "Answer: ...": the label of a prompt's line, or the model's own.
_LINE_LABEL = re.compile(r"^\W*(?:question|quote|answer|summary|document|task)\s*:\s*", re.I)
# A summary line's "Pages 4-9: " label or list mark, kept when a sentence after it stays.
_LINE_PREFIX = re.compile(
    r"^\s*(?:pages?\s+\d+(?:\s*[-–]\s*\d+)?\s*:\s*|[-*•]\s+|\d{1,2}[.)]\s+)*", re.I
)


@dataclass(frozen=True)
class _Words:
    """A sentence as compared: its words (casefolded) and its content words (stems, in order)."""

    words: tuple[str, ...]
    terms: tuple[str, ...]

    @cached_property
    def keys(self) -> frozenset[str]:
        """Its content words' first letters, the same for a word and its family: two sentences
        that share fewer keys than a rule needs words need no closer look."""
        return frozenset(term[:4] for term in self.terms)

    @cached_property
    def trigrams(self) -> set[tuple[str, ...]]:
        return {self.words[i : i + 3] for i in range(len(self.words) - 2)}


@dataclass(frozen=True)
class _Prompt:
    kind: str
    sentences: tuple[_Words, ...]
    pool: frozenset[str]  # every content word of the prompt


def overlaps_prompt(sentence: str, *, document: str | None = None) -> bool:
    """Whether `sentence` (one sentence of a model's summary or answer) repeats a prompt or is a
    placeholder (module docstring). `document`: the text the model was given, if the caller has
    it; a sentence whose content words the document holds does not echo an invented example."""
    if any(pattern.search(sentence) for pattern in _PLACEHOLDERS):
        return True
    said = _compared(sentence)
    if not said.words:
        return False
    return any(_echoes(said, prompt, document) for prompt in _prompts())


def drop_prompt_sentences(text: str, *, document: str | None = None) -> tuple[str, int]:
    """`text` without its sentences that overlap a prompt (`overlaps_prompt`), and how many were
    dropped. Lines are kept as written where nothing is dropped; a line that loses every
    sentence goes, with its "Pages 4-9:" label or list mark."""
    lines: list[str] = []
    num_dropped = 0
    for line in text.splitlines():
        label = _LINE_PREFIX.match(line)
        prefix = label.group(0) if label else ""
        body = line[len(prefix) :]
        sentences = [body[start:end] for start, end in split_sentences(body)]
        kept = [s for s in sentences if not overlaps_prompt(s, document=document)]
        num_dropped += len(sentences) - len(kept)
        if len(kept) == len(sentences):
            lines.append(line)
        elif kept:
            lines.append(prefix + " ".join(kept))
    cleaned = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return (cleaned if num_dropped else text), num_dropped


def _echoes(said: _Words, prompt: _Prompt, document: str | None) -> bool:
    if prompt.kind == EXAMPLE:
        return _copies(said, prompt) and not _document_holds(said, document)
    if prompt.kind == QUESTION:
        return any(_restates(said, sentence) for sentence in prompt.sentences)
    return any(_repeats(said, sentence) for sentence in prompt.sentences) or _made_of(
        said, prompt.pool
    )


def _repeats(said: _Words, sentence: _Words) -> bool:
    """Rule 2: the same words as a prompt sentence, or a run of its content words."""
    if said.words == sentence.words and len(sentence.words) >= 2:
        return True
    if len(said.keys & sentence.keys) < MIN_INSTRUCTION_TERMS:
        return False  # a run with enough words of the task would share them
    phrase = _longest_run(said.words, sentence.words)
    if (
        len(phrase) >= MIN_RUN_WORDS
        and _num_instruction_terms(_compared(" ".join(phrase)).terms) >= MIN_INSTRUCTION_TERMS
    ):
        return True
    run = _longest_run(said.terms, sentence.terms)
    if len(run) < MIN_RUN_TERMS and not (
        len(run) >= MIN_SHORT_RUN_TERMS and len(run) >= MIN_RUN_SHARE * len(sentence.terms)
    ):
        return False
    return _num_instruction_terms(run) >= MIN_INSTRUCTION_TERMS


def _restates(said: _Words, question: _Words) -> bool:
    """Rule 2 for a key-fact question: its words, or its content words and no others (a
    sentence that adds a word, "... the laws of Vermont ...", answers it)."""
    if said.words == question.words and len(question.words) >= 2:
        return True
    own, asked = set(said.terms), set(question.terms)
    return len(asked) >= 2 and _within(own, asked) and _within(asked, own)


def _within(found: set[str], pool: set[str] | frozenset[str]) -> bool:
    """Whether every word of `found` is in `pool`, itself or one of its family."""
    return all(term in pool or any(_same_family(term, word) for word in pool) for term in found)


def _made_of(said: _Words, pool: frozenset[str]) -> bool:
    """Rule 3: enough content words, every one of them the prompt's."""
    own = set(said.terms)
    if len(own) < MIN_ECHO_TERMS or not _within(own, pool):
        return False
    return _num_instruction_terms(own) >= MIN_INSTRUCTION_TERMS


def _copies(said: _Words, example: _Prompt) -> bool:
    """Rule 4: most of the sentence's word trigrams are in one example sentence, and it says
    nothing that sentence does not (a date of its own is a document's, not the example's)."""
    trigrams = said.trigrams
    if len(trigrams) < MIN_EXAMPLE_TRIGRAMS:
        return False
    return any(
        len(trigrams & sentence.trigrams) >= MIN_EXAMPLE_TRIGRAM_SHARE * len(trigrams)
        and set(said.terms) <= set(sentence.terms)
        for sentence in example.sentences
    )


def _document_holds(said: _Words, document: str | None) -> bool:
    return document is not None and set(said.terms) <= _document_terms(document)


@lru_cache(maxsize=4)
def _document_terms(document: str) -> frozenset[str]:
    return frozenset(terms(document))


def _longest_run(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    """The longest run of consecutive words of `a` that `b` has in the same order (families
    matching), as `a` has them."""
    best = (0, 0)  # (length, end in a)
    previous = [0] * (len(b) + 1)
    for i, word in enumerate(a, start=1):
        current = [0] * (len(b) + 1)
        for j, other in enumerate(b, start=1):
            if word == other or _same_family(word, other):
                current[j] = previous[j - 1] + 1
                best = max(best, (current[j], i))
        previous = current
    length, end = best
    return tuple(a[end - length : end])


def _same_family(a: str, b: str) -> bool:
    if a == b:
        return True
    shorter = min(len(a), len(b))
    if shorter < MIN_FAMILY_PREFIX or a[:MIN_FAMILY_PREFIX] != b[:MIN_FAMILY_PREFIX]:
        return False
    common = MIN_FAMILY_PREFIX
    while common < shorter and a[common] == b[common]:
        common += 1
    return shorter - common <= MAX_FAMILY_TAIL


def _num_instruction_terms(found: Sequence[str] | set[str]) -> int:
    subject = _subject_terms()
    return sum(
        1
        for term in set(found)
        if term not in subject and not any(_same_family(term, word) for word in subject)
    )


def _compared(text: str) -> _Words:
    """A sentence as compared (module docstring): citations, the "[p. N]" form, page
    references and a leading "Question:" label left out; words casefolded."""
    text = _PAGE_REFERENCE.sub(" ", _CITATION_FORM.sub(" ", remove_citations(text)))
    text = _LINE_LABEL.sub("", text)
    words = tuple(word.casefold().replace("’", "'") for word in WORD.findall(text))
    content = " ".join(word for word in words if word not in _FUNCTION_WORDS)
    kept = tuple(term for term in terms(content) if len(term) > 1 and term not in _FUNCTION_WORDS)
    return _Words(words, kept)


@lru_cache(maxsize=1)
def _subject_terms() -> frozenset[str]:
    return frozenset(_compared(subject_words()).terms)


@lru_cache(maxsize=1)
def _prompts() -> tuple[_Prompt, ...]:
    prompts = []
    for prompt in prompt_texts():
        sentences = []
        for line in prompt.text.splitlines():
            for start, end in split_sentences(line):
                compared = _compared(line[start:end])
                if compared.words:
                    sentences.append(compared)
        pool = frozenset(term for sentence in sentences for term in sentence.terms)
        prompts.append(_Prompt(prompt.kind, tuple(sentences), pool))
    return tuple(prompts)
