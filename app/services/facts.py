"""Key facts: saved once per facts job, replacing the document's earlier ones; read per document;
exported for the whole library as one row per document and one column per field.

A facts job may be delivered twice; saving finds the first delivery's rows by job id and
returns them. Functions flush; the caller commits.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.models import Document, Fact, FactSource
from app.errors import UnknownExportFormat

# The export's leading columns; one column per fact field follows.
DOCUMENT_COLUMNS = ("document_id", "file_name", "title", "kind")
EXPORT_FORMATS = (".csv", ".json")


@dataclass(frozen=True)
class NewFact:
    """One fact to store. `evidence` is a list of {"text", "page", "start_char", "end_char"};
    `origin` says where the value was read ("caption, p. 1"); `value_table` holds the rows of a
    value of several parts (a label's doses), each with its "page", "start_char", "end_char"."""

    field: str
    label: str
    position: int
    value: str
    normalized_value: str
    confidence: float
    source: FactSource | str
    page: int | None = None
    evidence: Sequence[dict[str, Any]] = field(default_factory=list)
    origin: str = ""
    value_table: Sequence[dict[str, Any]] = field(default_factory=list)


def facts_for_job(*, session: Session, job_id: int) -> list[Fact]:
    query = select(Fact).where(Fact.job_id == job_id).order_by(Fact.position, Fact.id)
    return list(session.scalars(query))


def list_facts(*, session: Session, document_id: int) -> list[Fact]:
    """The document's facts in schema order (empty until a facts job has run)."""
    query = select(Fact).where(Fact.document_id == document_id).order_by(Fact.position, Fact.id)
    return list(session.scalars(query))


def save_facts(
    *,
    session: Session,
    job_id: int,
    document_id: int,
    facts: Sequence[NewFact],
    model: str,
) -> list[Fact]:
    """The job's facts: the document's earlier facts replaced by these, or, when an earlier
    delivery of the job saved them already, those."""
    existing = facts_for_job(session=session, job_id=job_id)
    if existing:
        return existing
    session.execute(delete(Fact).where(Fact.document_id == document_id))
    rows = [
        Fact(
            document_id=document_id,
            job_id=job_id,
            field=new.field,
            label=new.label,
            position=new.position,
            value=new.value,
            normalized_value=new.normalized_value,
            evidence=[dict(item) for item in new.evidence],
            page=new.page,
            confidence=float(new.confidence),
            source=FactSource(new.source),
            model=model,
            origin=new.origin,
            value_table=[dict(row) for row in new.value_table],
        )
        for new in facts
    ]
    session.add_all(rows)
    session.flush()
    return rows


def export_table(*, session: Session) -> tuple[list[str], list[dict[str, Any]]]:
    """Every document as a row: its id, file name, title and kind, then each fact field's
    normalised value ("" where the document has no such fact). Fields are columns in the order
    their schemas give them, documents in id order."""
    documents = list(session.scalars(select(Document).order_by(Document.id)))
    facts = session.scalars(select(Fact).order_by(Fact.document_id, Fact.position, Fact.id))
    by_document: dict[int, dict[str, str]] = {}
    order: dict[str, tuple[int, int]] = {}
    for fact in facts:
        by_document.setdefault(fact.document_id, {})[fact.field] = (
            fact.normalized_value or fact.value
        )
        order.setdefault(fact.field, (fact.position, len(order)))
    fields = sorted(order, key=lambda name: order[name][1])
    rows = []
    for document in documents:
        values = by_document.get(document.id, {})
        row: dict[str, Any] = {
            "document_id": document.id,
            "file_name": document.file_name,
            "title": document.title or "",
            "kind": document.kind.value,
        }
        row.update({name: values.get(name, "") for name in fields})
        rows.append(row)
    return [*DOCUMENT_COLUMNS, *fields], rows


def render_export(columns: Sequence[str], rows: Sequence[dict[str, Any]], suffix: str) -> str:
    """The table as CSV (a header row, then a row per document) or JSON (a list of objects)."""
    if suffix == ".csv":
        buffer = io.StringIO()
        # RFC 4180 line ends: a cell holding a line break or carriage return is then quoted.
        writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(
            {name: spreadsheet_safe(value) for name, value in row.items()} for row in rows
        )
        return buffer.getvalue()
    if suffix == ".json":
        return json.dumps([dict(row) for row in rows], indent=1, ensure_ascii=False) + "\n"
    raise _unknown_format(suffix)


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: one that begins with =, +, -, @, a tab or a
    carriage return (a PDF title or file name can: '=HYPERLINK("http://x.example", "y")') gets a
    leading apostrophe, as OWASP's advice on CSV injection says, so it is never run as a
    formula. Numbers stay numbers; JSON exports stay verbatim."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _unknown_format(suffix: str) -> UnknownExportFormat:
    given = f"a {suffix} file" if suffix else "a file without a suffix"
    return UnknownExportFormat(f"LongDoc exports key facts as .csv or .json, not as {given}.")


def export_facts(*, session: Session, path: Path) -> int:
    """Write the library's key facts to `path` (.csv or .json); returns the number of rows."""
    suffix = path.suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise _unknown_format(suffix)
    columns, rows = export_table(session=session)
    path.write_text(render_export(columns, rows, suffix), encoding="utf-8")
    return len(rows)
