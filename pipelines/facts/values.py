"""The two readers of every value type: one checks the model's answer against the quotes
(validation), the other reads the value from the quotes by rule, for when the model's fails."""

from __future__ import annotations

from collections.abc import Callable

from pipelines.facts import values_clauses as clauses
from pipelines.facts import values_names as names
from pipelines.facts import values_parties as parties
from pipelines.facts import values_time as time
from pipelines.facts.context import FieldContext
from pipelines.facts.reading import Reading

ModelReader = Callable[[FieldContext, str], Reading | None]
RuleReader = Callable[[FieldContext], Reading | None]


def _no_model_reading(context: FieldContext, answer: str) -> Reading | None:
    return None


def _no_rule_reading(context: FieldContext) -> Reading | None:
    return None


READERS: dict[str, tuple[ModelReader, RuleReader]] = {
    "title": (names.read_title_model, names.read_title_rule),
    "parties": (parties.read_parties_model, parties.read_parties_rule),
    "case_parties": (names.read_case_parties_model, names.read_case_parties_rule),
    "court": (names.read_court_model, names.read_court_rule),
    "docket": (names.read_docket_model, names.read_docket_rule),
    "date": (time.read_date_model, time.read_date_rule),
    "term": (time.read_term_model, time.read_term_rule),
    "duration": (time.read_duration_model, time.read_duration_rule),
    "jurisdiction": (clauses.read_jurisdiction_model, clauses.read_jurisdiction_rule),
    "clause": (clauses.read_clause_model, clauses.read_clause_rule),
    "disposition": (clauses.read_disposition_model, clauses.read_disposition_rule),
    "text": (clauses.read_text_model, clauses.read_text_rule),
    # Structure-only types (pipelines.facts.by_structure reads them): nothing to validate.
    "judges": (_no_model_reading, _no_rule_reading),
    "drug": (_no_model_reading, _no_rule_reading),
}


def validate(context: FieldContext, answer: str) -> Reading | None:
    """The model's answer as a value, if it passes its type's checks against the quotes."""
    model_reader, _ = READERS[context.spec.value_type]
    return model_reader(context, answer)


def read_by_rule(context: FieldContext) -> Reading | None:
    """The value the quotes give by rule (a date parser, the jurisdiction list, a pattern)."""
    _, rule_reader = READERS[context.spec.value_type]
    return rule_reader(context)
