"""The labelled questions and key facts of bench/quality_questions.json, loaded and checked.

The check refuses a label file that could score an answer right for the wrong reason: an
accepted form that the question itself contains (an answer restating the question would pass),
a part with no form, a `need` beyond the parts, a kind outside KINDS, a document with fewer
than MIN_QUESTIONS questions, or a repeated id.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._answer_scoring import Expectation, is_special_form, normalize

LABELS_PATH = Path(__file__).with_name("quality_questions.json")
MIN_QUESTIONS = 5
GENRE_FOLDERS = {"contract": "legal", "opinion": "legal", "label": "medical"}
KINDS = {
    "opinion": ("court", "parties", "docket", "date", "judges", "disposition", "holding", "motion"),
    "label": (
        "boxed_warning",
        "indications",
        "dosage",
        "contraindications",
        "warnings",
        "interactions",
    ),
    "contract": ("parties", "date", "expiration", "renewal", "governing_law", "notice"),
}
FACT_FIELDS = {
    "opinion": (
        "court",
        "case_parties",
        "parties",
        "docket_number",
        "lower_docket_number",
        "decision_date",
        "judges",
        "disposition",
    ),
    "label": (
        "drug_name",
        "boxed_warning",
        "indications",
        "dosage",
        "contraindications",
        "warnings",
        "interactions",
    ),
    "contract": ("parties",),
}


class LabelError(ValueError):
    """The label file breaks a rule of the module docstring; the message says where."""


@dataclass(frozen=True)
class LabelledQuestion:
    id: str
    kind: str
    question: str
    expectation: Expectation
    pages: tuple[int, ...]


@dataclass(frozen=True)
class FactLabel:
    field: str
    expectation: Expectation
    pages: tuple[int, ...]


@dataclass(frozen=True)
class DocumentLabels:
    file: str
    genre: str  # "contract" | "opinion" | "label"
    questions: tuple[LabelledQuestion, ...]
    key_facts: tuple[FactLabel, ...]

    @property
    def folder(self) -> str:
        return GENRE_FOLDERS[self.genre]


def _expectation(raw: dict[str, Any], where: str) -> Expectation:
    parts = raw.get("expect", [])
    absent = bool(raw.get("absent", False))
    if not absent and not parts:
        raise LabelError(f"{where}: no expected parts")
    if any(not part or not all(isinstance(f, str) and f.strip() for f in part) for part in parts):
        raise LabelError(f"{where}: an empty part or form")
    need = raw.get("need", len(parts))
    if parts and not 1 <= need <= len(parts):
        raise LabelError(f"{where}: need {need} of {len(parts)} parts")
    return Expectation.of(parts, need if parts else 0, absent)


def _question(raw: dict[str, Any], genre: str) -> LabelledQuestion:
    where = raw.get("id", "?")
    if raw.get("kind") not in KINDS[genre]:
        raise LabelError(f"{where}: kind {raw.get('kind')!r} is not one of {KINDS[genre]}")
    expectation = _expectation(raw, where)
    asked = f" {normalize(raw['question'])} "
    for part in expectation.parts:
        for form in part:
            literal = not is_special_form(form)
            if literal and f" {normalize(form)} " in asked:
                raise LabelError(f"{where}: the question itself states the form {form!r}")
    return LabelledQuestion(
        raw["id"], raw["kind"], raw["question"], expectation, tuple(raw.get("pages", ()))
    )


def _document(raw: dict[str, Any]) -> DocumentLabels:
    genre = raw["genre"]
    questions = tuple(_question(q, genre) for q in raw["questions"])
    if len(questions) < MIN_QUESTIONS:
        raise LabelError(f"{raw['file']}: {len(questions)} questions, fewer than {MIN_QUESTIONS}")
    facts = []
    for field, fact in raw.get("key_facts", {}).items():
        if field not in FACT_FIELDS[genre]:
            raise LabelError(f"{raw['file']}: key fact {field!r} is not one of {genre}'s fields")
        facts.append(
            FactLabel(
                field, _expectation(fact, f"{raw['file']} {field}"), tuple(fact.get("pages", ()))
            )
        )
    return DocumentLabels(raw["file"], genre, questions, tuple(facts))


def load_labels(path: Path = LABELS_PATH) -> list[DocumentLabels]:
    """Every document's labels, checked (LabelError on the first broken rule)."""
    documents = [_document(raw) for raw in json.loads(path.read_text())["documents"]]
    ids = Counter(q.id for d in documents for q in d.questions)
    repeated = sorted(i for i, n in ids.items() if n > 1)
    if repeated:
        raise LabelError(f"repeated question ids: {', '.join(repeated)}")
    return documents


def kind_counts(documents: list[DocumentLabels]) -> dict[str, dict[str, int]]:
    """Per kind: fact questions and absent ones."""
    counts: dict[str, dict[str, int]] = {}
    for document in documents:
        for question in document.questions:
            row = counts.setdefault(question.kind, {"fact": 0, "absent": 0})
            row["absent" if question.expectation.absent else "fact"] += 1
    return counts
