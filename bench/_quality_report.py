"""bench/quality.py's scoring of one document and its Markdown report."""

from __future__ import annotations

from typing import Any

from bench import _quality_scores as scores
from pipelines.documents import PageText
from pipelines.values.dates import find_dates

CONTRACT_QUESTIONS = {
    "governing_law": "Which state's or country's law governs this agreement?",
    "parties": "Who are the parties to this agreement?",
    "agreement_date": "On what date was this agreement made?",
}
CLAUSE_FIELDS = {
    "expiration_date": "Expiration Date",
    "renewal_term": "Renewal Term",
    "notice_period": "Notice Period To Terminate Renewal",
}
FACT_SCORES = (
    "governing_law",
    "parties",
    "agreement_date",
    "effective_date",
    "agreement_or_effective_date",
    "expiration_date",
    "renewal_term",
    "notice_period",
)
ANSWER_SCORES = ("governing_law", "parties", "agreement_date")
OPINION_FIELDS = ("court", "case_parties", "docket_number", "decision_date", "disposition")


def _date_right(value: str, gold: str | None) -> bool:
    return value == (gold or "")


def law_pages(labels: dict, pages: list[PageText]) -> list[int]:
    """The pages that hold the labelled governing-law clause."""
    found = {
        p for label in labels.get("Governing Law") or [] for p in scores.label_pages(pages, label)
    }
    return sorted(found)


def _contract_facts(facts: dict, labels: dict, law_pages: set[int]) -> dict[str, Any]:
    gold_law = scores.gold_jurisdiction(labels.get("Governing Law") or [])
    law = facts.get("governing_law", {})
    if gold_law:
        law_right = law.get("normalized") == gold_law and law.get("page") in law_pages
    else:
        law_right = law.get("normalized", "") == ""
    agreement = scores.gold_date(labels.get("Agreement Date") or [])
    effective = scores.gold_date(labels.get("Effective Date") or [])
    got_agreement = facts.get("agreement_date", {}).get("normalized", "")
    got_effective = facts.get("effective_date", {}).get("normalized", "")
    if agreement or effective:
        either = bool(agreement and got_agreement == agreement) or bool(
            effective and got_effective == effective
        )
    else:
        either = not got_agreement and not got_effective
    result = {
        "governing_law": law_right,
        "parties": scores.parties_hit(
            facts.get("parties", {}).get("value", ""),
            scores.gold_party_names(labels.get("Parties") or []),
        ),
        "agreement_date": _date_right(got_agreement, agreement),
        "effective_date": _date_right(got_effective, effective),
        "agreement_or_effective_date": either,
    }
    for field, label_name in CLAUSE_FIELDS.items():
        gold = labels.get(label_name) or []
        fact = facts.get(field, {})
        # Unlabelled: nothing to check (a value may still be right); the report counts them.
        found = fact.get("source", "none") != "none"
        result[field] = (found and scores.quote_holds_label(fact["quotes"], gold)) if gold else None
    return result


def _contract_answers(answers: list[dict], labels: dict, law_pages: set[int]) -> dict:
    by_question = {a["question"]: a for a in answers}
    result: dict[str, Any] = {}
    gold_law = scores.gold_jurisdiction(labels.get("Governing Law") or [])
    law = by_question.get(CONTRACT_QUESTIONS["governing_law"])
    if law is not None:
        if gold_law:
            result["governing_law"] = scores.names_jurisdiction(law["text"], gold_law) and bool(
                law_pages & set(law["cited_pages"])
            )
        else:
            result["governing_law"] = not scores.any_jurisdiction(law["text"])
    parties = by_question.get(CONTRACT_QUESTIONS["parties"])
    if parties is not None:
        gold = scores.gold_party_names(labels.get("Parties") or [])
        result["parties"] = scores.parties_hit(parties["text"], gold)
    date = by_question.get(CONTRACT_QUESTIONS["agreement_date"])
    if date is not None:
        gold_date = scores.gold_date(labels.get("Agreement Date") or [])
        written = {m.iso for m in find_dates(date["text"])}
        result["agreement_date"] = gold_date in written if gold_date else not written
    return result


def _opinion_facts(facts: dict, gold: dict[str, str]) -> dict[str, bool]:
    result = {}
    for field in OPINION_FIELDS:
        got = scores.squash(facts.get(field, {}).get("normalized", ""))
        want = scores.squash(gold[field])
        result[field] = bool(got) and (got == want or want in got or got in want)
    return result


# A court named in a summary: the gold court's words, or the words that name its level.
_COURT_WORDS = ("supreme court", "court of appeals", "circuit", "district court")


def _summary_scores(summary: dict, opinion_gold: dict | None) -> dict[str, Any]:
    """How many of the summary's sentences rest on a quoted passage; for an opinion, whether the
    supported sentences name the court and the outcome."""
    sentences = summary["sentences"]
    result: dict[str, Any] = {
        "num_sentences": len(sentences),
        "num_supported": sum(s["status"] == "supported" for s in sentences),
        "num_unsupported": sum(s["status"] == "unsupported" for s in sentences),
    }
    if opinion_gold:
        shown = summary["supported_text"]
        result["names_court"], result["names_outcome"] = _names(shown, opinion_gold)
        own = summary.get("model_supported_text", shown)
        result["model_names_court"], result["model_names_outcome"] = _names(own, opinion_gold)
        result["num_lead"] = len(summary.get("lead", ()))
    return result


def _names(text: str, opinion_gold: dict) -> tuple[bool, bool]:
    """Whether `text` names the opinion's court, and its outcome."""
    text = text.lower()
    court = opinion_gold["court"].lower()
    words = [w for w in _COURT_WORDS if w in court] or [court]
    names_court = court in text or any(w in text for w in words)
    outcomes = opinion_gold["disposition"].lower().split(" and ")
    return names_court, any(word in text for word in outcomes)


def score_document(entry: dict, opinion_gold: dict | None) -> dict[str, Any]:
    """Scores of one document's entry (its labels, the pages of its governing-law clause in
    entry["law_pages"], and whichever of facts, answers and summary it has)."""
    labels = entry.get("labels")
    pages = set(entry.get("law_pages") or [])
    result: dict[str, Any] = {}
    if "facts" in entry:
        facts = entry["facts"]["facts"]
        if labels:
            result["facts"] = _contract_facts(facts, labels, pages)
        elif opinion_gold:
            result["facts"] = _opinion_facts(facts, opinion_gold)
    if "answers" in entry and labels:
        result["answers"] = _contract_answers(entry["answers"], labels, pages)
    if "answers_before_facts" in entry and labels:
        early = _contract_answers(entry["answers_before_facts"], labels, pages)
        result["answers_before_facts"] = early
    if "summary" in entry and entry["summary"].get("sentences") is not None:
        result["summary"] = _summary_scores(entry["summary"], opinion_gold)
    texts = [a["text"] for a in entry.get("answers", []) + entry.get("answers_before_facts", [])]
    if "summary" in entry:
        texts.append(entry["summary"]["text"])
    if texts:
        repeats = [scores.phrase_repeats(text) for text in texts]
        result["max_phrase_count"] = max(r["max_phrase_count"] for r in repeats)
        result["num_texts_over_limit"] = sum(r["num_phrases_over_limit"] > 0 for r in repeats)
    return result


# ---- the report ----------------------------------------------------------------------------


def _tally(documents: list[dict], part: str, field: str) -> str:
    values = [d["scores"].get(part, {}).get(field) for d in documents]
    checked = [v for v in values if v is not None]
    if not checked:
        return "—"
    return f"{sum(checked)}/{len(checked)}"


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown(result: dict[str, Any]) -> str:
    documents = result["documents"]
    runs = result["runs"]
    contracts = [d for d in documents if d.get("labels")]
    opinions = [d for d in documents if not d.get("labels")]
    lines = [
        "# Quality on the dev set: key facts, answers, summaries (issue 11)",
        "",
        "Generated by `bench/quality.py`: the worker's own job code, default model "
        "(SmolLM2-135M-Instruct), greedy decoding, CPU. Each part as last run:",
        "",
        "| part | commit | date (UTC) | seconds | load average at the end | settings |",
        "|---|---|---|---|---|---|",
    ]
    for part, run in result["runs"].items():
        git = run["git"]
        commit = f"`{git['commit']}`" + (
            f" + uncommitted {', '.join(git['uncommitted'])}" if git["uncommitted"] else ""
        )
        lines.append(
            f"| {part} | {commit} | {run['date_utc']} | {run['total_seconds']:.0f} | "
            f"{run['load_average_end']} ({run['cpu_count']} cores, shared) | {run['settings']} |"
        )
    lines.append("")
    if contracts:
        lines += [
            f"## CUAD dev contracts ({len(contracts)})",
            "",
            "| field | key facts | answer (facts stored) | answer (before the facts job) |",
            "|---|---|---|---|",
        ]
        for field in FACT_SCORES:
            answered = field in ANSWER_SCORES
            answer = _tally(contracts, "answers", field) if answered else "—"
            early = _tally(contracts, "answers_before_facts", field) if answered else "—"
            facts = _tally(contracts, "facts", field)
            lines.append(f"| {field} | {facts} | {answer} | {early} |")
        lines += [
            "",
            "Answers are asked twice in a full run: before the document's key-facts job (the "
            "model answers from the quotes, pipelines.answer.question) and after it (a question that a "
            "stored fact answers gets the fact, pipelines.answer.from_facts). The dev questions are "
            "worded like the fact fields' own questions, so the second column measures the "
            "route, not the matching of paraphrases (tests/pipelines/answer/test_from_facts.py does).",
            "",
            "Governing law: the jurisdiction CUAD labels, with the labelled clause on the fact's "
            "page or a cited page (naming none where the label has none or is redacted). Parties: "
            "at least two labelled names. Dates: the ISO day (none where the label has none). "
            "Expiration, renewal, notice: the fact quotes the labelled clause, counted over "
            "labelled contracts only.",
            "",
        ]
    if opinions and any("facts" in d["scores"] for d in opinions):
        lines += ["## Court opinions: key facts", "", "| field | right |", "|---|---|"]
        lines += [f"| {f} | {_tally(opinions, 'facts', f)} |" for f in OPINION_FIELDS]
        lines.append("")
    with_facts = [d for d in documents if "facts" in d]
    if with_facts:
        lines += [
            "## Key facts per document",
            "",
            "Seconds: the facts job alone, in a warm worker (the model is started before the "
            "first job, as a running worker has it"
            + (
                f"; that start took {runs['facts']['engine_start_s']} s in this run"
                if runs.get("facts", {}).get("engine_start_s") is not None
                else ""
            )
            + "). Key passages come first in the summary job, in under a second (no model).",
            "",
            "| document | pages | seconds | found | model / rule | governing law or court | parties | date |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for d in with_facts:
            facts = d["facts"]["facts"]
            found = [f for f in facts.values() if f["source"] != "none"]
            model = sum(f["source"] == "model" for f in found)

            def value(*names: str, facts: dict = facts) -> str:
                for name in names:
                    if name in facts and facts[name]["value"]:
                        return f"{_short(facts[name]['value'], 45)} (p. {facts[name]['page']})"
                return "—"

            lines.append(
                f"| {d['file']} | {d['num_pages']} | {d['facts']['seconds']:.0f} | "
                f"{len(found)}/{len(facts)} | {model} / {len(found) - model} | "
                f"{value('governing_law', 'court')} | {value('parties', 'case_parties')} | "
                f"{value('agreement_date', 'decision_date')} |"
            )
        lines.append("")
    summarized = [d for d in documents if "summary" in d["scores"]]
    if summarized:
        lines += [
            "## Summaries: every sentence against the document",
            "",
            "Each sentence of the model's summary checked by pipelines.summary.support: "
            "supported (its quote carries it), unsupported (it states a name, number, date or "
            "place the document lacks), or without evidence; the UI and the CLI show the "
            "supported ones with their pages and set the others apart. Before them comes the "
            "lead: one line per identifying key fact, each with its quotes (pipelines."
            "summary_lead). For the opinions, whether the summary as shown (lead and supported "
            "sentences) names the court and the outcome, and whether the model's supported "
            "sentences alone do.",
            "",
            "| document | method | seconds | lead lines | sentences | supported | unsupported "
            "| court | outcome | court (model alone) | outcome (model alone) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]

        def yes(got: dict, key: str) -> str:
            return {True: "yes", False: "no"}.get(got.get(key), "—")

        for d in summarized:
            got = d["scores"]["summary"]
            lines.append(
                f"| {d['file']} | {d['summary'].get('method', '')} | "
                f"{d['summary']['seconds']:.0f} | {len(d['summary'].get('lead', ()))} | "
                f"{got['num_sentences']} | {got['num_supported']} | {got['num_unsupported']} | "
                f"{yes(got, 'names_court')} | {yes(got, 'names_outcome')} | "
                f"{yes(got, 'model_names_court')} | {yes(got, 'model_names_outcome')} |"
            )
        total = sum(d["scores"]["summary"]["num_sentences"] for d in summarized)
        supported = sum(d["scores"]["summary"]["num_supported"] for d in summarized)
        lines += ["", f"All summaries: {supported} of {total} sentences supported.", ""]
    texts = [d for d in documents if "max_phrase_count" in d["scores"]]
    if texts:
        lines += [
            "## Repeated phrases in answers and summaries",
            "",
            "A phrase of 5 words may occur at most twice (issue 11).",
            "",
            "| document | most repeated phrase (times) | texts over the limit |",
            "|---|---|---|",
        ]
        for d in texts:
            lines.append(
                f"| {d['file']} | {d['scores']['max_phrase_count']} | "
                f"{d['scores']['num_texts_over_limit']} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"
