"""The issue-21 sections of bench/results/quality.md: labelled questions per kind, key facts per
field against the labels, and prompt text in summaries, each table with its target beside it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench import _answer_scoring as scoring
from bench._labelled_scores import (
    NONE_FOUND,
    NOT_EXTRACTED,
    PARTLY_SUPPORTED,
    SUPPORTED,
    is_wrong_supported,
)
from bench._question_labels import FACT_FIELDS, DocumentLabels

TARGET_RIGHT_PCT = 85
TARGET_FACTS_PCT = 90
_FACT_OUTCOMES = ("right", "partial", "wrong", "missed")


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "—"


def _question_rows(records: list[dict[str, Any]]) -> list[str]:
    rows = []
    kinds = sorted({r["kind"] for r in records})
    for kind in [*kinds, None]:
        mine = [r for r in records if kind is None or r["kind"] == kind]
        count = Counter(r["outcome"] for r in mine)
        right = [r for r in mine if r["outcome"] == scoring.RIGHT]
        rows.append(
            f"| {kind or '**all**'} | {len(mine)} | {count['right']} | {count['partial']} | "
            f"{count['wrong']} | {count['missed']} | {count['abstained']} | "
            f"{_pct(count['right'], len(mine))} | {sum(map(is_wrong_supported, mine))} | "
            f"{sum(r['outcome'] == scoring.MISSED and r['status'] == SUPPORTED for r in mine)} | "
            f"{sum(r['status'] == SUPPORTED for r in right)} | "
            f"{sum(r['status'] == PARTLY_SUPPORTED for r in mine)} | "
            f"{sum(r['cites_labelled_page'] for r in right)} |"
        )
    return rows


def _absent_rows(records: list[dict[str, Any]]) -> list[str]:
    rows = []
    for kind in [*sorted({r["kind"] for r in records}), None]:
        mine = [r for r in records if kind is None or r["kind"] == kind]
        count = Counter(r["outcome"] for r in mine)
        rows.append(
            f"| {kind or '**all**'} | {len(mine)} | {count['right']} | {count['wrong']} | "
            f"{count['missed']} | {sum(map(is_wrong_supported, mine))} |"
        )
    return rows


def _questions_section(documents: list[dict[str, Any]]) -> list[str]:
    records = [r for d in documents for r in d.get("questions", [])]
    if not records:
        return []
    facts = [r for r in records if not r["absent"]]
    absent = [r for r in records if r["absent"]]
    right = sum(r["outcome"] == scoring.RIGHT for r in facts)
    wrong_supported = sum(map(is_wrong_supported, records))
    lines = [
        "## Labelled questions (issue 21)",
        "",
        f"{len(records)} questions on {sum('questions' in d for d in documents)} document(s) "
        "(bench/quality_questions.json: written from the PDFs, page of each answer noted), "
        "asked after the document's key-facts job, as a user asks once the upload is done. "
        "Judged by the answer as shown: a quoted fallback by its quote "
        "(bench/_answer_scoring.py says how).",
        "",
        "| target | now |",
        "|---|---|",
        f"| wrong answers marked supported: 0 | {wrong_supported} |",
        f"| right >= {TARGET_RIGHT_PCT}% of fact questions | {_pct(right, len(facts))} "
        f"({right}/{len(facts)}) |",
        "",
        "Fact questions (the document states the answer). Partial: some parts of a two-part "
        'answer; missed: no value of the asked kind and no "not found"; abstained: says the '
        "document does not say (or support no_answer).",
        "",
        "| kind | questions | right | partial | wrong | missed | abstained | right % "
        "| wrong marked supported | missed marked supported | right marked supported "
        "| partly supported | right citing a labelled page |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *_question_rows(facts),
        "",
    ]
    if absent:
        lines += [
            "Questions the document does not answer: right is abstaining or saying what it says "
            "instead; wrong is stating a value.",
            "",
            "| kind | questions | right | wrong | missed | wrong marked supported |",
            "|---|---|---|---|---|---|",
            *_absent_rows(absent),
            "",
        ]
    statuses = sorted({str(r["status"]) for r in records})
    lines += [
        "Outcome by support status (all questions):",
        "",
        "| status | " + " | ".join(scoring.OUTCOMES) + " |",
        "|---|" + "---|" * len(scoring.OUTCOMES),
    ]
    for status in statuses:
        count = Counter(r["outcome"] for r in records if str(r["status"]) == status)
        lines.append(f"| {status} | " + " | ".join(str(count[o]) for o in scoring.OUTCOMES) + " |")
    echoed = sum(r["echoes_prompt"] for r in records)
    lines += ["", f"Answers repeating prompt text (6 words in a row): {echoed}.", ""]
    lines += [
        "| document | questions | right | partial | wrong | missed | abstained | absent right |"
    ]
    lines += ["|---|---|---|---|---|---|---|---|"]
    for d in documents:
        mine = d.get("questions", [])
        if not mine:
            continue
        count = Counter(r["outcome"] for r in mine if not r["absent"])
        absent_right = sum(r["outcome"] == scoring.RIGHT for r in mine if r["absent"])
        lines.append(
            f"| {d['file']} | {len(mine)} | {count['right']} | {count['partial']} | "
            f"{count['wrong']} | {count['missed']} | {count['abstained']} | "
            f"{absent_right}/{sum(r['absent'] for r in mine)} |"
        )
    return [*lines, ""]


def _facts_section(documents: list[dict[str, Any]], labels: dict[str, DocumentLabels]) -> list[str]:
    scored = [d for d in documents if d.get("scores", {}).get("labelled_facts")]
    if not scored:
        return []
    lines = [
        "## Key facts against the labels (issue 21)",
        "",
        f"Target: right >= {TARGET_FACTS_PCT}% per field where the document has the fact. Only "
        'fields the facts job put out are scored; "not extracted": the field is not in its '
        "output (not yet a field of this checkout). Where the document lacks the fact (a "
        "boxed warning on a label without one), right is finding none.",
        "",
        "| genre | field | documents with it | right | partial | wrong | none found | "
        "right % | not extracted | lacking it: none found / value given |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for genre, fields in FACT_FIELDS.items():
        mine = [d for d in scored if labels[d["file"]].genre == genre]
        if not mine:
            continue
        for field in fields:
            got = [
                d["scores"]["labelled_facts"][field]
                for d in mine
                if field in d["scores"]["labelled_facts"]
            ]
            if not got:
                continue
            has = [g["outcome"] for g in got if not g["absent"]]
            lacks = [g["outcome"] for g in got if g["absent"]]
            extracted = [o for o in has if o != NOT_EXTRACTED]
            count = Counter(extracted)
            lacking = [o for o in lacks if o != NOT_EXTRACTED]
            lines.append(
                f"| {genre} | {field} | {len(has)} | {count['right']} | {count['partial']} | "
                f"{count['wrong'] + count['missed']} | {count[NONE_FOUND]} | "
                f"{_pct(count['right'], len(extracted))} | "
                f"{len(has) - len(extracted) + len(lacks) - len(lacking)} | "
                + (
                    f"{lacking.count('right')} / {lacking.count('wrong')} |"
                    if lacking
                    else ("— |" if not lacks else "not extracted |")
                )
            )
    return [*lines, ""]


def _echo_section(documents: list[dict[str, Any]]) -> list[str]:
    checked = [d for d in documents if "prompt_echo" in d.get("scores", {})]
    if not checked:
        return []
    flagged = [d for d in checked if d["scores"]["prompt_echo"]["parts_with_prompt_text"]]
    lines = [
        "## Prompt text in summaries (issue 21)",
        "",
        "Each stored part of a summary (the lead lines, the checked sentences, the model's raw "
        "text) against every instruction prompt of the pipelines (pipelines.prompts.texts: system, "
        "one-pass, section, combine, question and collection prompts) rendered with an empty "
        "document: any run of 6 words they share, or a "
        'placeholder ("Paste your answer here", "This is one part of a longer").',
        "",
        "The summaries are those of the summaries part as last run (the table at the top).",
        "",
        f"Target: no summary containing prompt text. Now: {len(flagged)} of {len(checked)}.",
        "",
        "| document | parts with prompt text | first phrases |",
        "|---|---|---|",
    ]
    for d in checked:
        echo = d["scores"]["prompt_echo"]
        parts = ", ".join(echo["parts_with_prompt_text"]) or "none"
        phrases = "; ".join(f'"{p}"' for p in echo["prompt_phrases"][:2]) or "—"
        lines.append(f"| {d['file']} | {parts} | {phrases} |")
    return [*lines, ""]


def markdown_sections(
    documents: list[dict[str, Any]], labels: dict[str, DocumentLabels]
) -> list[str]:
    return [
        *_questions_section(documents),
        *_facts_section(documents, labels),
        *_echo_section(documents),
    ]
