"""bench/quality.py's issue-21 scores: each labelled question's answer judged
(bench._answer_scoring), the key facts against their labels, and the summaries and answers
checked for prompt text (bench._prompt_echo).

A question's record holds ids, statuses and verdicts, never the answer's or the document's
text: it is what bench/results/quality.json keeps.
"""

from __future__ import annotations

from typing import Any

from bench import _answer_scoring as scoring
from bench._prompt_echo import PromptPhrases, echoes, summary_echoes
from bench._question_labels import DocumentLabels, LabelledQuestion

SUPPORTED = "supported"
PARTLY_SUPPORTED = "partly_supported"
NONE_FOUND, NOT_EXTRACTED = "none found", "not extracted"
# The question kind whose value detector fits each key-fact field.
FIELD_KINDS = {
    "decision_date": "date",
    "docket_number": "docket",
    "lower_docket_number": "docket",
    "case_parties": "parties",
}


def question_record(
    question: LabelledQuestion, answer: dict[str, Any], phrases: PromptPhrases
) -> dict[str, Any]:
    """The verdict on one answer (bench.quality.Harness.answer's dict) and what to keep of it."""
    status = answer.get("support")
    verdict = scoring.judge(question.kind, question.expectation, answer["text"], status)
    cited = set(answer.get("cited_pages") or ())
    return {
        "id": question.id,
        "kind": question.kind,
        "absent": question.expectation.absent,
        "status": status,
        "outcome": verdict.outcome,
        "why": verdict.why,
        "parts_stated": verdict.parts_stated,
        "parts_needed": question.expectation.need,
        "judged_quote": verdict.is_quote,
        "method": answer.get("method"),
        "cited_pages": sorted(cited),
        "labelled_pages": list(question.pages),
        "cites_labelled_page": bool(cited & set(question.pages)),
        "echoes_prompt": bool(echoes(answer["text"], phrases)),
        "answer_chars": len(answer["text"]),
        "seconds": answer.get("seconds"),
    }


def is_wrong_supported(record: dict[str, Any]) -> bool:
    return record["outcome"] == scoring.WRONG and record["status"] == SUPPORTED


def fact_outcomes(facts: dict[str, Any], labels: DocumentLabels) -> dict[str, dict[str, Any]]:
    """Per labelled key-fact field: its outcome (an Outcome, NONE_FOUND or NOT_EXTRACTED) and
    whether the document lacks the fact (then right is NONE_FOUND)."""
    result = {}
    for label in labels.key_facts:
        fact = facts.get(label.field)
        absent = label.expectation.absent
        if fact is None:
            outcome = NOT_EXTRACTED
        else:
            value = " ; ".join(
                str(fact.get(key) or "") for key in ("value", "normalized") if fact.get(key)
            )
            if fact.get("source") == "none" or not value.strip():
                outcome = scoring.RIGHT if absent else NONE_FOUND
            else:
                kind = FIELD_KINDS.get(label.field, label.field)
                outcome = scoring.judge(kind, label.expectation, value, None).outcome
                if absent:
                    outcome = scoring.WRONG  # a value where the document states none
        result[label.field] = {"outcome": outcome, "absent": absent}
    return result


def echo_scores(entry: dict[str, Any], phrases: PromptPhrases) -> dict[str, Any]:
    """Which stored parts of the entry's summary repeat prompt text (counts and part names;
    the phrases are the prompts' words, kept for the report)."""
    if "summary" not in entry:
        return {}
    found = summary_echoes(entry["summary"], phrases)
    return {
        "parts_with_prompt_text": sorted(part for part, phrases in found.items() if phrases),
        "prompt_phrases": sorted({p for phrases in found.values() for p in phrases})[:5],
    }
