"""Key facts of a document: per field of its kind's schema, a value with the quoted evidence it
rests on, its page, a confidence, and where the value came from.

First the document's structure (pipelines.facts.by_structure): a label's section headings, an
opinion's caption and conclusion, a contract's term and renewal clauses give their fields'
values directly, each with the spans it was read from and an origin ("section 2 DOSAGE AND
ADMINISTRATION, p. 3"); the model is not asked about those. The other fields:

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
from dataclasses import dataclass, replace
from typing import Any

from pipelines.facts.by_structure import read_structure
from pipelines.facts.context import FieldContext, PassageRanker, gather
from pipelines.facts.fact import SOURCES, Fact
from pipelines.facts.fields import schema_for
from pipelines.facts.origins import retrieved_origin, with_roles
from pipelines.facts.prompts import ANSWER_SCHEMA, field_messages
from pipelines.facts.reading import Reading, answer_from_reply, cut_before
from pipelines.facts.schema import FieldSpec
from pipelines.facts.structured import Found
from pipelines.facts.values import read_by_rule, validate
from pipelines.ingest.classify import guess_subkind
from pipelines.inputs import DocumentInput
from pipelines.kinds import CONTRACT
from pipelines.model_calls import CallLog
from pipelines.protocols import ChatModel
from pipelines.retrieval.bm25 import PassageIndex
from pipelines.retrieval.evidence import DocumentSentences, Evidence

logger = logging.getLogger(__name__)

AGREED, MODEL_ONLY, RULE_ONLY = 1.0, 0.8, 0.6
# A value the document's structure gives (a section heading, the caption): the heading and the
# layout vouch for it, more than for a model's value alone, about as a model and a rule agreeing.
FROM_STRUCTURE = 0.9
# A stored quote longer than this (a sentence the splitter could not cut) keeps the words
# around the value only.
MAX_EVIDENCE_CHARS = 800
_AROUND_CHARS = 300


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
    structure = read_structure(subkind, sentences)
    starts = [passage.start_char for passage in document.passages]
    # The model reads only the fields the structure leaves empty, where retrieval may find them.
    asked = [s for s in schema if s.name not in structure and not s.structure_only]
    contexts = [gather(spec, document.passages, ranker, sentences) for spec in asked]
    prompts = [field_messages(c.spec, c.quotes) if c.quotes else None for c in contexts]
    progress = _Progress(on_progress, len(schema), 0)
    for _ in range(len(schema) - len(asked)):  # read from the structure: done already
        progress.step()
    answers, num_json = _read_all(calls, contexts, prompts, progress)
    read = {
        context.spec.name: _fact(context, answer, document, starts)
        for context, answer in zip(contexts, answers, strict=True)
    }
    facts = tuple(
        _structured_fact(spec, structure[spec.name], document, starts, sentences)
        if spec.name in structure
        else _with_origin(subkind, spec, read.get(spec.name) or _empty(spec), sentences)
        for spec in schema
    )
    sources = Counter(fact.source for fact in facts)
    stats = {
        **calls.stats(),
        "subkind": subkind,
        "num_fields": len(facts),
        "num_found": sum(fact.is_found for fact in facts),
        "sources": {source: sources.get(source, 0) for source in SOURCES},
        "num_from_structure": len(structure.keys() & {spec.name for spec in schema}),
        # Model replies that came as JSON of the answer schema (a model server's structured
        # output); the others were parsed as plain text.
        "num_json_replies": num_json,
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


class _Progress:
    """Reports (fields done, fields in the schema) after each field; the fields read from the
    structure are reported first, before the model starts."""

    def __init__(self, report: FieldProgress | None, total: int, done: int) -> None:
        self.report, self.total, self.done = report, total, done

    def step(self) -> None:
        self.done += 1
        if self.report is not None:
            self.report(self.done, self.total)


def _read_all(
    calls: CallLog,
    contexts: Sequence[FieldContext],
    prompts: Sequence[list[dict[str, str]] | None],
    progress: _Progress,
) -> tuple[list[str], int]:
    """The model's answer to each prompt ("" where a field found no quote to ask about), and
    how many came as JSON of ANSWER_SCHEMA: the prompts that share a token limit go to the
    model together (one batched call), asking for the schema where the model can follow one."""
    answers = [""] * len(prompts)
    num_json = 0
    groups: dict[int, list[int]] = {}
    for index, (context, messages) in enumerate(zip(contexts, prompts, strict=True)):
        if messages is not None:
            groups.setdefault(context.spec.max_new_tokens, []).append(index)
    for messages in prompts:
        if messages is None:  # nothing to ask: done at once
            progress.step()
    for max_new_tokens, indices in groups.items():
        texts = calls.run_many(
            [f"fact:{contexts[i].spec.name}" for i in indices],
            [prompts[i] for i in indices],
            max_new_tokens=max_new_tokens,
            response_schema=ANSWER_SCHEMA,
        )
        for index, text in zip(indices, texts, strict=True):
            answers[index], is_json = answer_from_reply(text)
            num_json += is_json
            progress.step()
    return answers, num_json


def _empty(spec: FieldSpec) -> Fact:
    return Fact(spec.name, spec.label, "", "", (), 0.0, "none")


def _structured_fact(
    spec: FieldSpec,
    found: Found,
    document: DocumentInput,
    starts: list[int],
    sentences: DocumentSentences,
) -> Fact:
    """A fact the document's structure gives, quoted from the spans it was read from."""
    evidence = tuple(
        Evidence(
            sentences.text[start:end],
            sentences.page_of(start),
            document.passages[max(0, bisect.bisect_right(starts, start) - 1)].ordinal,
            start,
            end,
            1.0,
        )
        for start, end in found.spans
    )
    return Fact(
        spec.name,
        spec.label,
        found.value,
        found.normalized,
        evidence,
        FROM_STRUCTURE,
        "rule",
        found.origin,
        found.table,
    )


def _with_origin(subkind: str, spec: FieldSpec, fact: Fact, sentences: DocumentSentences) -> Fact:
    if subkind == CONTRACT and spec.value_type == "parties" and fact.is_found:
        fact = with_roles(fact, sentences)
    origin = retrieved_origin(subkind, spec, fact, sentences)
    return replace(fact, origin=origin) if origin else fact


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
