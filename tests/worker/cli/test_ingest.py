"""`longdoc ingest` end to end: the real entry point, the real tokenizer, SQLite in a temp folder."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from app.db.models import Document, Job, JobKind, JobStatus
from app.db.session import make_engine, session_factory
from app.services import dispatch
from app.settings import get_settings
from tests.app.test_dispatch import take_message
from tests.pipelines import pdf_factory
from worker.cli import cli

CORPUS = Path(
    os.environ.get("LONGDOC_TEST_CORPUS")
    or Path(__file__).resolve().parents[3].parent / "shared" / "corpus"
)
CORPUS_FOLDERS = ("legal", "medical", "edge", "edge_extra")
# Every refusal the corpus may legitimately produce; anything else is a bug.
TYPED_REFUSALS = {"password_required", "no_text_layer", "damaged_pdf"}

runner = CliRunner()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_cache_dir: Path) -> dict[str, str]:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    values = {
        "LONGDOC_DATA_DIR": str(tmp_path / "data"),
        "LONGDOC_MODEL_CACHE_DIR": str(model_cache_dir),
        # Parsing and refusals only: embedding the whole corpus would take many minutes here
        # (passage vectors through the CLI: tests/worker/test_cli_embed.py).
        "LONGDOC_EMBEDDING_MODEL": "none",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield values
    get_settings.cache_clear()


def _jobs_and_documents() -> tuple[list[Job], list[Document]]:
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            return list(session.scalars(select(Job))), list(session.scalars(select(Document)))
    finally:
        engine.dispose()


def test_ingest_folder_reports_each_file_and_goes_on(env, tmp_path, count_tokens) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    pdf_factory.text_pdf(inbox, ["Patient dosage 5 mg twice daily.", "Page two."], name="a.pdf")
    pdf_factory.not_a_pdf(inbox, name="b.pdf")
    (inbox / "c.pdf").write_bytes((inbox / "a.pdf").read_bytes())
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0

    result = runner.invoke(cli, ["ingest", str(inbox), str(tmp_path / "missing.pdf")])

    assert result.exit_code == 0, result.output
    assert "1 stored, 1 already present, 2 refused." in result.output
    assert "not a PDF" in result.output or "not a pdf" in result.output.lower()
    jobs, stored = _jobs_and_documents()
    assert [d.file_name for d in stored] == ["a.pdf"]
    assert stored[0].kind == "medical"
    ingests = [j for j in jobs if j.kind == JobKind.INGEST]  # the stored one's key facts: queued
    assert sorted(j.status for j in ingests) == ["failed", "succeeded", "succeeded"]

    listing = runner.invoke(cli, ["docs"])
    assert listing.exit_code == 0 and "a.pdf" in listing.output


def test_ingest_without_database_says_how_to_create_it(env, tmp_path) -> None:
    result = runner.invoke(cli, ["ingest", str(tmp_path)])

    assert result.exit_code == 1
    assert "longdoc db upgrade" in result.output
    assert "Traceback" not in result.output


def test_ingest_rejects_unknown_kind(env, tmp_path) -> None:
    result = runner.invoke(cli, ["ingest", "--kind", "poetry", str(tmp_path)])

    assert result.exit_code != 0
    assert "--kind" in result.output and "medical" in result.output


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.timeout(1800)  # every file's parse child, on a shared 2-core machine
def test_whole_corpus_is_stored_or_refused_with_a_reason(env, count_tokens, monkeypatch) -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is absent (looked in {CORPUS})")
    # What this test is for: the CLI stores or refuses every file with a typed reason and
    # accounts for each. OCR and the hidden-text check off through their real settings (a scan
    # is then refused as no_text_layer, a typed refusal): both run on every corpus file in
    # tests/pipelines/ingest/test_parse_corpus.py and through the CLI in
    # tests/worker/ingest/test_ingest_sources.py; here they took about 70% of the time.
    monkeypatch.setenv("LONGDOC_OCR_ENABLED", "false")
    monkeypatch.setenv("LONGDOC_REDACTION_CHECK_ENABLED", "false")
    longdoc = [str(Path(sys.executable).parent / "longdoc")]
    subprocess.run([*longdoc, "db", "upgrade"], check=True, capture_output=True, env=os.environ)
    folders = [str(CORPUS / name) for name in CORPUS_FOLDERS]

    run = subprocess.run(
        [*longdoc, "ingest", *folders], capture_output=True, text=True, env=os.environ, timeout=1700
    )

    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr
    pdfs = sorted(p for name in CORPUS_FOLDERS for p in (CORPUS / name).glob("*.pdf"))
    jobs, stored = _jobs_and_documents()
    jobs = [j for j in jobs if j.kind == JobKind.INGEST]  # not the stored ones' key facts
    assert len(jobs) == len(pdfs)
    refused = Counter(j.error_code for j in jobs if j.status == JobStatus.FAILED)
    assert set(refused) <= TYPED_REFUSALS, refused
    assert all(j.error and j.error.endswith(".") for j in jobs if j.status == JobStatus.FAILED)
    assert all(d.num_pages > 0 and d.num_chars > 0 for d in stored)
    # The corpus README's known cases: the broken page tree and the unknown password.
    by_name = {j.params["file_name"]: j for j in jobs}
    assert by_name["017-unreadable-meta-data__unreadablemetadata.pdf"].error_code == "damaged_pdf"
    assert by_name["pypdf_encrypted-file.pdf"].error_code == "password_required"
    assert len(stored) + sum(refused.values()) + sum(
        1 for j in jobs if j.status == JobStatus.SUCCEEDED and j.stats.get("already_present")
    ) == len(pdfs)
    print(f"\ncorpus: {len(pdfs)} PDFs, {len(stored)} stored, refused {dict(refused)}")

    # The password of the pypdf test files opens the ones that needed it.
    again = subprocess.run(
        [*longdoc, "ingest", "--password", "asdfzxcv", str(CORPUS / "edge_extra")],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=600,
    )
    assert again.returncode == 0
    assert "0 refused" not in again.stdout  # encrypted-file.pdf still needs its unknown password
    _, stored_after = _jobs_and_documents()
    assert len(stored_after) > len(stored)


def test_a_stored_file_gets_its_key_facts_job_queued_for_the_workers(env, tmp_path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    pdf_factory.text_pdf(folder, ["This lease is governed by the laws of Oregon."], name="a.pdf")
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0

    first = runner.invoke(cli, ["ingest", str(folder)])
    again = runner.invoke(cli, ["ingest", str(folder)])  # already present: no second facts job

    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "Key facts queued for 1 document(s)" in first.output
    assert "Key facts" not in again.output
    jobs, (document,) = _jobs_and_documents()
    (facts,) = [j for j in jobs if j.kind == JobKind.FACTS]
    assert (facts.status, facts.document_id, facts.task_id is not None) == (
        JobStatus.QUEUED,
        document.id,
        True,
    )
    message = take_message(get_settings(), dispatch.QUEUE_GPU_BATCH)
    assert (message["headers"]["task"], message["body"][0]) == (dispatch.TASK_FACTS, [facts.id])
    with pytest.raises(AssertionError, match="no message"):
        take_message(get_settings(), dispatch.QUEUE_GPU_BATCH, timeout_s=1.0)


def test_with_the_broker_down_the_files_are_stored_and_their_facts_jobs_say_why(
    env, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGDOC_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    get_settings.cache_clear()
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.pdf", "b.pdf"):
        pdf_factory.text_pdf(folder, [f"Lease {name} is governed by Oregon law."], name=name)
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0

    result = runner.invoke(cli, ["ingest", str(folder)])

    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "2 stored" in said
    assert "Key facts were not queued for 2 document(s)" in said
    assert "could not reach its task queue" in said
    jobs, stored = _jobs_and_documents()
    facts = [j for j in jobs if j.kind == JobKind.FACTS]
    assert len(stored) == 2 and len(facts) == 2
    assert {(j.status, j.error_code) for j in facts} == {(JobStatus.FAILED, "broker_unavailable")}
