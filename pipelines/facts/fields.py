"""The key-fact schema of each sub-kind of document (pipelines.ingest.classify.guess_subkind)."""

from __future__ import annotations

from pipelines.facts.fields_legal import CONTRACT_FIELDS, OPINION_FIELDS
from pipelines.facts.fields_medical import GUIDELINE_FIELDS, LABEL_FIELDS, PAPER_FIELDS
from pipelines.facts.schema import FieldSpec
from pipelines.kinds import CONTRACT, GUIDELINE, LABEL, OPINION, PAPER

SCHEMAS: dict[str, tuple[FieldSpec, ...]] = {
    CONTRACT: CONTRACT_FIELDS,
    OPINION: OPINION_FIELDS,
    LABEL: LABEL_FIELDS,
    GUIDELINE: GUIDELINE_FIELDS,
    PAPER: PAPER_FIELDS,
}


def schema_for(subkind: str) -> tuple[FieldSpec, ...]:
    """The fields of a sub-kind; none for "other" (no schema: no key facts)."""
    return SCHEMAS.get(subkind, ())


def all_fields() -> dict[str, FieldSpec]:
    """Every field of every schema by name. A name two schemas share ("parties": a contract's
    and an opinion's) is the first schema's spec: they ask for the same kind of value."""
    fields: dict[str, FieldSpec] = {}
    for schema in SCHEMAS.values():
        for spec in schema:
            fields.setdefault(spec.name, spec)
    return fields
