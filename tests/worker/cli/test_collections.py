"""`longdoc collections ...`, `longdoc search` and `longdoc ask --collection`, end to end on
SQLite with the embedded broker. A thread stands in for the worker: it runs the queued job's
task body (worker/jobs/collection.py) with the echo model."""

from __future__ import annotations

import pytest

from app.db.models import FactSource, Job, JobKind, JobStatus
from app.services import collection_answers, collections, facts, jobs
from tests.app.library_rows import FILLER, store
from tests.pipelines.echo_model import EchoModel
from tests.worker.cli import test_ask as test_cli_ask
from tests.worker.cli.test_ask import WAIT_S, _worker, cli_runner
from worker.cli import cli
from worker.jobs import collection as runner_collection
from worker.jobs import job_run

sessions = test_cli_ask.sessions  # the fixture: a migrated SQLite database, embedded broker

ASSIGNMENT = "The Supplier may not assign this Agreement without the written consent of the Buyer."
NON_COMPETE = "The Employee shall not compete with the Company for two years after it ends."


def _run(*args: str):
    result = cli_runner.invoke(cli, list(args))
    return result, " ".join(result.output.split())


def _library(sessions) -> dict[str, int]:
    with sessions() as session:
        ids = {
            "lease": store(session, "Office Lease", [FILLER, FILLER]).id,
            "supply": store(session, "Supply Agreement", [FILLER, ASSIGNMENT, FILLER]).id,
            "employment": store(session, "Employment Contract", [FILLER, FILLER, NON_COMPETE]).id,
            "other": store(session, "Unrelated Memo", [ASSIGNMENT]).id,
        }
        session.commit()
    return ids


def test_collection_commands_and_their_sentences(sessions) -> None:
    ids = _library(sessions)
    assert _run("collections", "create", "Matter 7")[0].exit_code == 0
    result, output = _run("collections", "create", "matter 7")
    assert result.exit_code == 1 and "There is already a collection named 'Matter 7'" in output
    result, output = _run("collections", "add", "Matter 7", str(ids["lease"]), str(ids["supply"]))
    assert result.exit_code == 0 and "Added 2 document(s) to 'Matter 7'." in output
    result, output = _run("collections", "add", "Matter 7", "999")
    assert result.exit_code == 1 and "There is no document with id 999" in output
    assert _run("collections", "rename", "Matter 7", "Acme v. Beta")[0].exit_code == 0
    result, output = _run("collections", "show", "acme v. beta")
    assert "Office Lease" in output and "'Acme v. Beta' holds 2 document(s)." in output
    result, output = _run("collections", "remove", "Acme v. Beta", str(ids["lease"]))
    assert "Removed 1 document(s)" in output
    result, output = _run("collections", "list")
    assert "Acme v. Beta" in output and "1 collection." in output
    result, output = _run("collections", "delete", "Acme v. Beta")
    assert "its 1 document(s) stay in the library" in output
    result, output = _run("collections", "show", "Acme v. Beta")
    assert result.exit_code == 1 and "There is no collection named 'Acme v. Beta'" in output
    assert "Supply Agreement" in _run("docs")[1]  # the documents stayed


def test_search_prints_document_page_and_snippet_and_filters(sessions) -> None:
    ids = _library(sessions)
    result, output = _run("search", "assigned consent")
    assert result.exit_code == 0, result.output
    assert "Supply Agreement, p. 2" in output and "Unrelated Memo, p. 1" in output
    assert "2 passages found." in output
    _run("collections", "create", "Matter")
    _run("collections", "add", "Matter", str(ids["supply"]))
    result, output = _run("search", "assigned consent", "--collection", "Matter")
    assert "Supply Agreement, p. 2" in output and "Unrelated" not in output
    assert "1 passage found." in output
    assert "0 passages found." in _run("search", "assigned", "--kind", "medical")[1]
    result, output = _run("search", "x", "--since", "yesterday")
    assert result.exit_code == 2 and "YYYY-MM-DD" in output


def _answer_worker(sessions):
    return _worker(
        sessions,
        JobKind.ANSWER,
        lambda job_id: runner_collection.run_collection_answer(
            job_id, sessions=sessions, model_factory=EchoModel, max_new_tokens=200
        ),
    )


def test_ask_a_collection_cites_the_right_document_and_page(sessions) -> None:
    ids = _library(sessions)
    _run("collections", "create", "Matter")
    _run(
        "collections",
        "add",
        "Matter",
        str(ids["lease"]),
        str(ids["supply"]),
        str(ids["employment"]),
    )
    thread = _answer_worker(sessions)
    result, output = _run(
        "ask", "--collection", "Matter", "Can the supplier assign the agreement without consent?"
    )
    thread.join(WAIT_S)
    assert result.exit_code == 0, result.output
    assert "[Supply Agreement, p. 2]" in output
    assert (
        'Quoted from the documents: [Supply Agreement, p. 2] "The Supplier may not assign' in output
    )
    assert "Unrelated Memo" not in output  # not in the collection


def test_ask_every_document_prints_a_table_using_key_facts(sessions, monkeypatch) -> None:
    # One line a row, so the cells can be read. Through COLUMNS, read at print time: setting
    # console.width would leave the width fixed for every later test when monkeypatch restores it.
    monkeypatch.setenv("COLUMNS", "240")
    ids = _library(sessions)
    with sessions() as session:
        job = jobs.create_job(session=session, kind=JobKind.FACTS, document_id=ids["employment"])
        session.flush()
        facts.save_facts(
            session=session,
            job_id=job.id,
            document_id=ids["employment"],
            model="test",
            facts=[
                facts.NewFact(
                    field="non_compete",
                    label="Non-compete",
                    position=0,
                    value="Two years after employment",
                    normalized_value="two years",
                    confidence=0.9,
                    source=FactSource.MODEL,
                    page=3,
                    evidence=[{"text": NON_COMPETE, "page": 3, "start_char": 0, "end_char": 9}],
                )
            ],
        )
        session.commit()
    _run("collections", "create", "Matter")
    _run("collections", "add", "Matter", str(ids["supply"]), str(ids["employment"]))
    thread = _answer_worker(sessions)
    result, output = _run(
        "ask", "--collection", "Matter", "Which of these contracts have a non-compete clause?"
    )
    thread.join(WAIT_S)
    assert result.exit_code == 0, result.output
    assert "Answered document by document" in output
    row = next(line for line in result.output.splitlines() if "Employment Contract" in line)
    assert "Two years after employment" in row and "key facts" in row and "│ 3 " in row
    assert "[Employment Contract, p. 3]" in output


def test_ask_with_collection_refuses_a_document_id_too(sessions) -> None:
    _library(sessions)
    _run("collections", "create", "Empty")
    result, output = _run("ask", "--collection", "Empty", "1", "What?")
    assert result.exit_code == 2 and "with --collection give only the question" in output
    result, output = _run("ask", "--collection", "Empty", "What?")
    assert result.exit_code == 1 and "holds no document yet" in output


def test_a_table_over_too_many_documents_fails_with_a_sentence(sessions, monkeypatch) -> None:
    monkeypatch.setattr(runner_collection, "MAX_TABLE_DOCUMENTS", 2)
    ids = _library(sessions)
    _run("collections", "create", "Big")
    _run("collections", "add", "Big", *(str(i) for i in ids.values()))
    thread = _answer_worker(sessions)
    result, output = _run("ask", "--collection", "Big", "--each", "Which have a non-compete?")
    thread.join(WAIT_S)
    assert result.exit_code == 1
    assert "at most 2 documents; this collection has 4" in output and "--retrieve" in output


@pytest.mark.slow  # the packaged embedding model
def test_search_ranks_by_meaning_where_passages_are_embedded(sessions) -> None:
    from app.query_encoder import query_encoder
    from app.services import documents
    from tests.app.test_search_fusion import PARAPHRASE, QUESTION, WORDY
    from worker.model.vector_store import embed_passages, to_bytes

    encoder = query_encoder("all-minilm-l6-v2")
    with sessions() as session:
        for title, text in (("Lease Schedule", WORDY), ("Office Lease", PARAPHRASE)):
            document = store(session, title, [text])
            documents.set_passage_embeddings(
                session=session,
                document_id=document.id,
                model=encoder.name,
                embeddings={0: to_bytes(embed_passages(encoder, [text])[0])},
            )
        session.commit()
    output = _run("search", QUESTION, "--any")[1]
    assert output.index("1. Office Lease") < output.index("2. Lease Schedule")
    output = _run("search", QUESTION, "--any", "--words-only")[1]
    assert output.index("1. Lease Schedule") < output.index("2. Office Lease")


def test_a_redelivered_collection_question_is_answered_once(sessions) -> None:
    ids = _library(sessions)
    with sessions() as session:
        matter = collections.create_collection(session=session, name="Matter")
        session.flush()
        collections.add_documents(
            session=session, collection_id=matter.id, document_ids=[ids["supply"]]
        )
        job = collection_answers.create_question_job(
            session=session, collection_id=matter.id, question="Can the supplier assign it?"
        )
        session.commit()
        job_id, collection_id = job.id, matter.id

    def run(model_factory) -> str:
        return runner_collection.run_collection_answer(
            job_id, sessions=sessions, model_factory=model_factory, max_new_tokens=64
        ).status

    def no_model():
        raise AssertionError("the model is not needed again")

    assert run(EchoModel) == job_run.SUCCEEDED
    assert run(no_model) == job_run.SKIPPED  # done
    with sessions() as session:  # a delivery that saved the answer, then lost the finish
        session.get(Job, job_id).status = JobStatus.RUNNING
        session.commit()
    assert run(no_model) == job_run.SUCCEEDED
    with sessions() as session:
        answers = collection_answers.list_for_collection(
            session=session, collection_id=collection_id
        )
        assert len(answers) == 1 and session.get(Job, job_id).status == JobStatus.SUCCEEDED
