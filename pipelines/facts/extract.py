"""Key facts of a document: per field of its kind's schema, a value with the quoted evidence it
rests on, its page, a confidence, and where the value came from.

Per field: retrieval (the field's generic query ranks passages; `sentence_evidence` picks the
sentences) -> the model reads the top quotes (a short prompt, a few new tokens) -> the answer
is validated against the quotes (a jurisdiction from the list named in a governing-law
sentence, a date the quote writes next to the field's cue, party names the document writes,
...). An answer that fails validation is replaced by the value a rule reads from the quotes
(date parser, jurisdiction list, patterns), marked source "rule"; when neither gives one the
value is left empty (source "none") rather than guessed.

Confidence, in [0, 1]: (0.5 + 0.5 * s) * f, where s is the supporting sentence's share of the
field's query terms (how squarely retrieval found it) and f is 1.0 when the model's value
passed validation and the rule reads the same value, 0.8 for the model's value alone, 0.6 for
the rule's alone; 0 for an empty value. It ranks facts for review; it is not a probability.

All field prompts are built first and then run, so a batched `complete_many` can replace the
loop in `_read_all`. Nothing here logs document text: field names and counts only.
"""

from __future__ import annotations

import bisect
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.facts.context import FieldContext, PassageRanker, gather
from pipelines.facts.fields import schema_for
from pipelines.facts.prompts import field_messages
from pipelines.facts.reading import Reading, cut_before
from pipelines.facts.values import read_by_rule, validate
from pipelines.ingest.classify import guess_subkind
from pipelines.inputs import DocumentInput
from pipelines.model_calls import CallLog
from pipelines.protocols import ChatModel
from pipelines.retrieval.bm25 import PassageIndex
from pipelines.retrieval.evidence import DocumentSentences, Evidence

logger = logging.getLogger(__name__)

SOURCES = ("model", "rule", "none")
AGREED, MODEL_ONLY, RULE_ONLY = 1.0, 0.8, 0.6
# A stored quote longer than this (a sentence the splitter could not cut) keeps the words
# around the value only.
MAX_EVIDENCE_CHARS = 800
_AROUND_CHARS = 300


@dataclass(frozen=True)
class Fact:
    """One key fact. `evidence` holds the quoted sentence(s) the value rests on, verbatim with
    their pages; for an empty value (source "none"), the nearest quote retrieval found, if any."""

    field: str
    label: str
    value: str
    normalized: str
    evidence: tuple[Evidence, ...]
    confidence: float
    source: str  # one of SOURCES

    @property
    def page(self) -> int | None:
        return self.evidence[0].page if self.evidence else None

    @property
    def is_found(self) -> bool:
        return self.source != "none"


@dataclass(frozen=True)
class FactsResult:
    subkind: str  # the schema used: "contract", "opinion", "label", "guideline", "paper", "other"
    facts: tuple[Fact, ...]
    stats: dict[str, Any]


FieldProgress = Callable[[int, int], None]  # (fields done, fields in the schema)


def extract_facts(
    document: DocumentInput,
    model: ChatModel,
    *,
    ranker: PassageRanker | None = None,
    sentences: DocumentSentences | None = None,
    subkind: str | None = None,
    on_progress: FieldProgress | None = None,
) -> FactsResult:
    """The key facts of `document` by its sub-kind's schema (none for "other").

    `ranker` ranks passages for a query (default: BM25 over the document's passages);
    `sentences` is the document split once, for callers that have it; `subkind` overrides
    pipelines.ingest.classify.guess_subkind.
    """
    subkind = subkind or guess_subkind(document.kind, document.pages)
    schema = schema_for(subkind)
    calls = CallLog(model)
    if not schema or not document.passages:
        return FactsResult(subkind, (), {**calls.stats(), "subkind": subkind, "num_fields": 0})
    ranker = ranker if ranker is not None else PassageIndex(document.passages)
    sentences = sentences if sentences is not None else DocumentSentences(document.pages)
    contexts = [gather(spec, document.passages, ranker, sentences) for spec in schema]
    prompts = [field_messages(c.spec, c.quotes) if c.quotes else None for c in contexts]
    answers = _read_all(calls, contexts, prompts, on_progress)
    starts = [passage.start_char for passage in document.passages]
    facts = tuple(
        _fact(context, answer, document, starts)
        for context, answer in zip(contexts, answers, strict=True)
    )
    sources = Counter(fact.source for fact in facts)
    stats = {
        **calls.stats(),
        "subkind": subkind,
        "num_fields": len(facts),
        "num_found": sum(fact.is_found for fact in facts),
        "sources": {source: sources.get(source, 0) for source in SOURCES},
    }
    logger.info(
        "key facts done: subkind=%s fields=%d found=%d model=%d rule=%d",
        subkind,
        len(facts),
        stats["num_found"],
        sources.get("model", 0),
        sources.get("rule", 0),
    )
    return FactsResult(subkind, facts, stats)


def _read_all(
    calls: CallLog,
    contexts: Sequence[FieldContext],
    prompts: Sequence[list[dict[str, str]] | None],
    on_progress: FieldProgress | None,
) -> list[str]:
    """The model's answer to each prompt ("" where a field found no quote to ask about): the
    prompts that share a token limit go to the model together (one batched call)."""
    answers = [""] * len(prompts)
    groups: dict[int, list[int]] = {}
    for index, (context, messages) in enumerate(zip(contexts, prompts, strict=True)):
        if messages is not None:
            groups.setdefault(context.spec.max_new_tokens, []).append(index)
    done = 0
    for messages in prompts:
        if messages is None:  # nothing to ask: done at once
            done += 1
            if on_progress is not None:
                on_progress(done, len(contexts))
    for max_new_tokens, indices in groups.items():
        texts = calls.run_many(
            [f"fact:{contexts[i].spec.name}" for i in indices],
            [prompts[i] for i in indices],
            max_new_tokens=max_new_tokens,
        )
        for index, text in zip(indices, texts, strict=True):
            answers[index] = text
            done += 1
            if on_progress is not None:
                on_progress(done, len(contexts))
    return answers


def _fact(context: FieldContext, answer: str, document: DocumentInput, starts: list[int]) -> Fact:
    spec = context.spec
    from_model = validate(context, answer) if answer.strip() else None
    from_rule = read_by_rule(context)
    if from_model is not None:
        agrees = from_rule is not None and from_rule.normalized == from_model.normalized
        reading, source, factor = from_model, "model", AGREED if agrees else MODEL_ONLY
    elif from_rule is not None:
        reading, source, factor = from_rule, "rule", RULE_ONLY
    else:
        nearest = context.quotes[:1]
        return Fact(spec.name, spec.label, "", "", tuple(nearest), 0.0, "none")
    evidence = _evidence_for(reading, context, document, starts)
    support = max((e.score for e in evidence), default=0.0)
    confidence = round((0.5 + 0.5 * support) * factor, 2)
    value = " ".join(reading.value.split())  # a value read across a line break
    return Fact(spec.name, spec.label, value, reading.normalized, evidence, confidence, source)


def _evidence_for(
    reading: Reading, context: FieldContext, document: DocumentInput, starts: list[int]
) -> tuple[Evidence, ...]:
    """The whole sentence(s) holding the value's words (cut around them when very long)."""
    sentences = context.document
    spans = sentences.overlapping(reading.start, reading.end) or [(reading.start, reading.end)]
    cut = cut_before(sentences, spans[0][0])
    if cut is not None:  # the clause's start, cut off by a blank line
        spans.insert(0, cut)
    scored = {e.start_char: e.score for e in (*context.sentences, *context.quotes)}
    quoted = []
    for start, end in spans:
        score = scored.get(start, 0.0)
        if end - start > MAX_EVIDENCE_CHARS:
            start, end = _around(sentences.text, start, end, reading)
        ordinal = document.passages[max(0, bisect.bisect_right(starts, start) - 1)].ordinal
        quoted.append(
            Evidence(
                sentences.text[start:end], sentences.page_of(start), ordinal, start, end, score
            )
        )
    return tuple(quoted)


def _around(text: str, start: int, end: int, reading: Reading) -> tuple[int, int]:
    lo = max(start, reading.start - _AROUND_CHARS)
    hi = min(end, reading.end + _AROUND_CHARS)
    if lo > start:
        space = text.find(" ", lo, reading.start)
        lo = space + 1 if space >= 0 else lo
    if hi < end:
        space = text.rfind(" ", reading.end, hi)
        hi = space if space >= 0 else hi
    return lo, hi
