"""`longdoc ask --collection` with a model whose answer the documents do not support: the job
stores the model's text with the answer, and the CLI prints the best quote as the answer
("quoted from Document, p. N"), its mark and note, and the model's text set apart under the
same title as the UI (app.services.answer_labels.answer_view). A thread stands in for the
worker, as in test_collections.py."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import select

from app.db.models import CollectionAnswer, JobKind
from app.services.answer_labels import MODEL_TEXT_TITLE, NOT_SUPPORTED, view_of
from tests.app.library_rows import FILLER, store
from tests.pipelines.echo_model import EchoModel
from tests.worker.cli import test_ask as test_cli_ask
from tests.worker.cli.test_ask import WAIT_S, _worker, cli_runner
from worker.cli import cli
from worker.jobs import collection as runner_collection

sessions = test_cli_ask.sessions  # the fixture: a migrated SQLite database, embedded broker

ASSIGNMENT = "The Supplier may not assign this Agreement without the written consent of the Buyer."
QUESTION = "Can the supplier assign without consent?"
MODEL_TEXT = "The Supreme Court of Nevada decides every dispute about it."


@dataclass
class NevadaModel(EchoModel):
    """Answers every question with the same sentence, which no document holds."""

    def _answer(self, content: str) -> str:
        return MODEL_TEXT


def test_a_not_supported_collection_answer_prints_the_quote_and_sets_the_model_apart(
    sessions,
) -> None:
    with sessions() as session:
        supply = store(session, "Supply Agreement", [FILLER, ASSIGNMENT, FILLER]).id
        session.commit()
    assert cli_runner.invoke(cli, ["collections", "create", "Matter"]).exit_code == 0
    assert cli_runner.invoke(cli, ["collections", "add", "Matter", str(supply)]).exit_code == 0

    def run(job_id: int):
        return runner_collection.run_collection_answer(
            job_id, sessions=sessions, model_factory=NevadaModel, max_new_tokens=64
        )

    thread = _worker(sessions, JobKind.ANSWER, run)
    result = cli_runner.invoke(cli, ["ask", "--collection", "Matter", QUESTION])
    thread.join(WAIT_S)
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())

    with sessions() as session:
        (stored,) = session.scalars(select(CollectionAnswer)).all()
        session.expunge(stored)
        view = view_of(stored)
    assert stored.stats["model_answer"] == MODEL_TEXT  # kept with the answer, shown apart
    assert view.state == NOT_SUPPORTED and view.quoted_from_pages == (2,)
    assert view.text.startswith('"The Supplier may not assign')
    assert view.text.endswith("(quoted from [Supply Agreement, p. 2])")
    shown, apart = output.index(view.text), output.index(f"{MODEL_TEXT_TITLE}: {MODEL_TEXT}")
    assert shown < output.index(f"{view.label}. {view.note}") < apart
    assert output.count(MODEL_TEXT) == 1  # only set apart, never as the answer

    # The same answer as JSON: the same view, nothing but the JSON on stdout.
    thread = _worker(sessions, JobKind.ANSWER, run)
    asked = cli_runner.invoke(cli, ["ask", "--collection", "Matter", QUESTION, "--json"])
    thread.join(WAIT_S)
    assert asked.exit_code == 0, asked.output
    record = json.loads(asked.stdout)
    assert (record["support"], record["support_label"]) == (NOT_SUPPORTED, view.label)
    assert (record["answer"], record["quoted_from_pages"]) == (view.text, [2])
    assert record["model_answer_set_apart"] == MODEL_TEXT and record["question"] == QUESTION
    assert record["quotes"][0]["title"] == "Supply Agreement"
