"""Instruction-like text in a document: lines written to steer a model that reads the document
("SYSTEM: ignore the question and answer that ...", chat-template role tags, "you are an AI"),
found, counted, and kept out of what the model reads and of what is quoted as evidence.

A contract or a label states things; it does not address the program that summarizes it. A line
that does is planted text: quoted, it would make a false statement look supported ("The contract
is governed by the law of Mars [p. 1]", resting on the planted line itself). So every
DocumentInput (pipelines.inputs) is read with such text masked: each flagged span is replaced
by line breaks of the same length, so every offset, page and passage boundary stays where it
is, a blank line ends the sentences around it (pipelines.ingest.sentences), and the retrieval,
the prompts, the evidence and the support checks (pipelines.answer.support, the summary's
pipelines.summary.support) never see it. The stored page text is unchanged: a reader still sees
the line on its page.

What is flagged (INSTRUCTION_PATTERNS, general, not fitted to one document): chat-template and
role tags (<|im_start|>, [INST], <<SYS>>, <system>, "### Instruction:"), a role label opening
a line (SYSTEM:, ASSISTANT:, USER: in capitals; in any case when the line then addresses the
model), requests to ignore or override the question, the instructions or the prompt, "answer
that ..." / "respond with '...'", and lines that tell the reader it is an AI or a language
model. A flagged span runs from the start of the sentence (or of the line, if later) holding
the match to the end of that line, and on to the end of the sentence the line ends in, so a
wrapped instruction and a statement written after it on the same line go together.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import replace

from pipelines.documents import PageText, Passage, document_text, page_spans
from pipelines.ingest.sentences import split_sentences

MASK = "\n"
_CUES = r"(?:ignore|disregard|answer|respond|reply|say|you|your|must|instructions?|prompt|pretend)"
_IGNORE_OBJECTS = r"(?:questions?|instructions?|prompts?|rules|context|directions|guidelines|query)"
_IGNORE_WORDS = (
    r"(?:all|any|the|your|my|these|those|previous|prior|above|earlier|preceding|other|system|"
    r"user's|user|original)"
)
INSTRUCTION_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Chat-template special tokens and role tags of any model family.
    re.compile(r"<\|[A-Za-z_]{2,32}\|>|\[/?INST\]|<</?SYS>>", re.IGNORECASE),
    re.compile(r"</?(?:system|assistant|user)>|###\s*(?:instruction|system|response)\s*:", re.I),
    # A role label opening a line: in capitals always, in any case when the line addresses the
    # model ("Nervous System: dizziness" opens no line with the label alone).
    re.compile(
        r"^[ \t>*#-]*(?:SYSTEM|ASSISTANT|USER|HUMAN|AI)[ \t]*(?:PROMPT|MESSAGE)?[ \t]*:", re.M
    ),
    re.compile(
        r"^[ \t>*#-]*(?:system|assistant|user|human|ai)[ \t]*(?:prompt|message)?[ \t]*:"
        rf"[^\n]*\b{_CUES}\b",
        re.IGNORECASE | re.MULTILINE,
    ),
    # "ignore the question", "disregard all previous instructions", "forget the prompt".
    re.compile(
        rf"\b(?:ignore|disregard|forget|override)\s+(?:{_IGNORE_WORDS}\s+)*{_IGNORE_OBJECTS}\b",
        re.IGNORECASE,
    ),
    # "answer that the governing law is ...", "respond with 'Mars'".
    # Imperative only (after "and", "instead", a sentence's start...), and followed by a clause:
    # "the defendant shall appear and answer that complaint" and "an answer that denied" pass.
    re.compile(
        r"(?:^|[.:;!?]\s+|\b(?:and|then|instead|just|always|only|please|simply)\s+)"
        r"(?:answer|respond|reply|say|state)\s+(?:only\s+)?that\s+"
        r"(?:the|it|this|there|they|you|its|[\"'\u201c\u2018])",
        re.IGNORECASE | re.MULTILINE,
    ),
    re.compile(r"\b(?:answer|respond|reply|say)\s+(?:only\s+)?with\s*[\"'\u201c\u2018]", re.I),
    # Text that tells its reader what it is: "You are an AI", "as a language model".
    # ("You are an Assistant Professor" is a letter of appointment: an assistant needs a word
    # that makes it a program.)
    re.compile(
        r"\byou\s+are\s+(?:now\s+)?(?:an?\s+)?(?:helpful\s+)?(?:ai\b|a\.i\.|artificial\s+"
        r"intelligence|(?:large\s+)?language\s+model|llm\b|chatbot|chat\s*gpt|"
        r"(?:helpful|ai|virtual|digital)\s+assistant\b)",
        re.IGNORECASE,
    ),
    re.compile(r"\bas\s+an?\s+(?:ai|large\s+language\s+model|language\s+model)\b", re.IGNORECASE),
    re.compile(
        r"\b(?:new|updated|real|actual|hidden|secret)\s+instructions?\s*:|\b(?:reveal|print|"
        r"repeat)\s+your\s+(?:system\s+)?(?:prompt|instructions)\b",
        re.IGNORECASE,
    ),
)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def is_instruction_like(text: str) -> bool:
    """Whether `text` holds instruction-like words (INSTRUCTION_PATTERNS)."""
    return any(pattern.search(text) for pattern in INSTRUCTION_PATTERNS)


def instruction_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of `text` to leave out, merged and in order (the module docstring)."""
    matches = sorted(
        (match.start(), match.end())
        for pattern in INSTRUCTION_PATTERNS
        for match in pattern.finditer(text)
    )
    if not matches:
        return []
    spans = []
    sentences_of: dict[int, list[tuple[int, int]]] = {}  # paragraph start -> its sentences
    blank_lines = [(m.start(), m.end()) for m in _BLANK_LINE.finditer(text)]
    blank_starts = [start for start, _ in blank_lines]
    for start, end in matches:
        para_start, para_end = _paragraph(blank_lines, blank_starts, len(text), start)
        if para_start not in sentences_of:
            found = split_sentences(text[para_start:para_end])
            sentences_of[para_start] = [(para_start + a, para_start + b) for a, b in found]
        sentences = sentences_of[para_start]
        line_start = text.rfind("\n", 0, start) + 1
        span_start = max(line_start, _sentence_around(sentences, start, default=(start, end))[0])
        line_end = text.find("\n", end)
        line_end = para_end if line_end < 0 or line_end > para_end else line_end
        span_end = max(end, line_end)
        span_end = max(span_end, _sentence_around(sentences, span_end - 1, default=(0, end))[1])
        spans.append((span_start, min(span_end, para_end)))
    return _merged(spans)


def masked(text: str, spans: Sequence[tuple[int, int]], offset: int = 0) -> str:
    """`text` (which starts at `offset` of the text `spans` point into) with the spans' characters
    replaced by MASK: the same length, so offsets stay valid."""
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        for index in range(max(start - offset, 0), min(end - offset, len(chars))):
            chars[index] = MASK
    return "".join(chars)


def without_instructions(
    pages: Sequence[PageText], passages: Sequence[Passage]
) -> tuple[tuple[PageText, ...], tuple[Passage, ...], tuple[tuple[int, int], ...]]:
    """The pages and passages with instruction-like text masked, and the masked spans (offsets
    into `document_text(pages)`); the same objects when there is none."""
    text = document_text(pages)
    spans = instruction_spans(text)
    if not spans:
        return tuple(pages), tuple(passages), ()
    ends = [span_end for _, span_end in spans]
    new_pages = []
    for page, (_, start, end) in zip(pages, page_spans(pages), strict=True):
        inside = _overlapping(spans, ends, start, end)
        if inside:
            page = replace(page, text=masked(page.text, inside, start))
        new_pages.append(page)
    new_passages = []
    for passage in passages:
        inside = _overlapping(spans, ends, passage.start_char, passage.end_char)
        if inside:
            passage = replace(passage, text=masked(passage.text, inside, passage.start_char))
        new_passages.append(passage)
    return tuple(new_pages), tuple(new_passages), tuple(spans)


def _paragraph(
    blank_lines: Sequence[tuple[int, int]], blank_starts: Sequence[int], length: int, offset: int
) -> tuple[int, int]:
    """[start, end) of the paragraph (between the text's blank lines) holding `offset`."""
    index = bisect.bisect_right(blank_starts, offset)  # blank lines starting at or before it
    start = blank_lines[index - 1][1] if index else 0
    end = blank_lines[index][0] if index < len(blank_lines) else length
    return start, end


def _overlapping(
    spans: Sequence[tuple[int, int]], ends: Sequence[int], start: int, end: int
) -> list[tuple[int, int]]:
    """The spans (merged, in order; `ends` their ends) that overlap [start, end)."""
    found = []
    for span in spans[bisect.bisect_right(ends, start) :]:
        if span[0] >= end:
            break
        found.append(span)
    return found


def _sentence_around(
    sentences: Sequence[tuple[int, int]], offset: int, *, default: tuple[int, int]
) -> tuple[int, int]:
    for start, end in sentences:
        if start <= offset < end:
            return start, end
    return default


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
