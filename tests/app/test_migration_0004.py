"""Migration 0004 (the facts table and the "facts" job kind) up and down, on both databases."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from app import migrate
from app.db.session import make_engine

INSERT_JOB = (
    "INSERT INTO jobs (kind, status, progress_done, progress_total, created_at, stats, params) "
    "VALUES (:kind, 'queued', 0, 0, CURRENT_TIMESTAMP, '{}', '{}')"
)


def _insert_job(engine, kind: str) -> None:
    with engine.begin() as connection:
        connection.execute(text(INSERT_JOB), {"kind": kind})


def test_0004_adds_facts_and_the_facts_job_kind_and_takes_them_back(database_url) -> None:
    engine = make_engine(database_url)
    try:
        migrate.upgrade(database_url, "0004")
        assert "facts" in inspect(engine).get_table_names()
        _insert_job(engine, "facts")
        _insert_job(engine, "answer")

        migrate.downgrade(database_url, "0001")
        assert "facts" not in inspect(engine).get_table_names()
        with engine.connect() as connection:
            kinds = connection.execute(text("SELECT kind FROM jobs")).scalars().all()
        assert kinds == ["answer"]  # the facts job went with its table
        with pytest.raises(IntegrityError):
            _insert_job(engine, "facts")  # the old constraint is back

        migrate.upgrade(database_url, "0004")
        _insert_job(engine, "facts")
        with pytest.raises(IntegrityError):
            _insert_job(engine, "no_such_kind")
    finally:
        engine.dispose()
