"""The model-server client (worker/model/openai_client.py) against a scripted local HTTP server:
the faults a real server cannot be made to produce, each a sentence, nothing stored from them."""

from __future__ import annotations

import logging
import threading

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind, JobStatus
from app.services import jobs, results
from app.settings import Settings, get_settings
from pipelines.model_calls import CallLog
from tests.pipelines import pdf_factory
from tests.worker.model.model_server_stub import Reply, chunks, closed_port, error, stub_server
from worker.cli.health import check_model_server
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import summary as summary_run
from worker.model import engine_holder
from worker.model.adapter import PRIORITY_BATCH, PRIORITY_INTERACTIVE
from worker.model.openai_client import OpenAIChatModel, RequestSlots
from worker.model.server_api import ModelServerError, ServerConfig

ASK = [{"role": "user", "content": "What law governs?"}]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.fixture
def stub():
    with stub_server() as server:
        yield server


def _model(base_url: str, sleeps: list[float] | None = None, **config) -> OpenAIChatModel:
    values = {"backoff_s": 0.5, "backoff_max_s": 2.0, "max_retries": 3, "timeout_s": 10.0}
    values.update(config)
    recorder = sleeps.append if sleeps is not None else (lambda _s: None)
    return OpenAIChatModel(ServerConfig(base_url, **values), sleep=recorder)


def test_a_streamed_reply_with_usage_and_the_servers_context_length(stub) -> None:
    stub.replies.append(chunks("Vermont law.", usage={"prompt_tokens": 11, "completion_tokens": 3}))
    model = _model(stub.base_url, api_key="sekret")
    written: list[tuple[int, int]] = []

    completion = model.complete(
        ASK, max_new_tokens=5, on_tokens=lambda w, m: written.append((w, m))
    )

    assert completion.text == "Vermont law."
    assert completion.stats["finish_reason"] == "stop" and "cut_by_length" not in completion.stats
    assert (completion.stats["num_prompt_tokens"], completion.stats["num_decode_tokens"]) == (11, 3)
    assert written == [(1, 5), (2, 5)]  # progress moved with each streamed piece
    assert (model.name, model.max_context_tokens) == ("stub-model", 4096)
    headers, body = stub.requests[0]
    assert headers["Authorization"] == "Bearer sekret" and body["stream"] is True
    assert body["model"] == "stub-model" and body["max_tokens"] == 5 and body["messages"] == ASK
    # Counted without a tokenizer, conservatively: more tokens than words.
    assert model.count_tokens(["What law governs?"]) == [6]


def test_without_a_context_length_the_setting_is_used(stub) -> None:
    stub.models = [{"id": "other"}, {"id": "mine"}]
    model = _model(stub.base_url, model="mine", context_tokens=2048)
    assert (model.name, model.max_context_tokens) == ("mine", 2048)


def test_a_wrong_key_is_told_in_a_sentence_that_never_shows_it(stub, caplog) -> None:
    stub.replies.append(error(401, "Invalid API key"))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ModelServerError) as caught:
        _model(stub.base_url, api_key="sekret-123").complete(ASK, max_new_tokens=4)
    assert caught.value.code == "model_server_key"
    assert "LONGDOC_LLM_API_KEY" in caught.value.sentence and "HTTP 401" in caught.value.sentence
    assert "sekret-123" not in caught.value.sentence + caplog.text
    assert "sekret-123" not in repr(ServerConfig(stub.base_url, api_key="sekret-123"))
    assert len(stub.requests) == 1  # a refused key is not retried


def test_a_busy_server_is_retried_with_bounded_backoff(stub) -> None:
    stub.replies.extend([error(429, **{"Retry-After": "1"}), error(503), chunks("Done.")])
    sleeps: list[float] = []
    completion = _model(stub.base_url, sleeps).complete(ASK, max_new_tokens=4)
    assert completion.text == "Done." and len(stub.requests) == 3
    assert len(sleeps) == 2 and sleeps[0] >= 1.0 and all(0 < s <= 2.0 for s in sleeps)


def test_a_server_that_stays_busy_fails_after_the_last_retry(stub) -> None:
    stub.replies.append(error(500))
    sleeps: list[float] = []
    with pytest.raises(ModelServerError) as caught:
        _model(stub.base_url, sleeps, max_retries=2).complete(ASK, max_new_tokens=4)
    assert caught.value.code == "model_server_busy" and "HTTP 500" in caught.value.sentence
    assert len(stub.requests) == 3 and len(sleeps) == 2 and max(sleeps) <= 2.0


@pytest.mark.parametrize(
    "garbage",
    [
        Reply(body=b"data: this is not json\n\n"),
        Reply(body=b"<html>proxy error</html>", content_type="text/html"),
        chunks(""),  # finished, but nothing written
        Reply(body=b'data: {"choices": [{"index": 0, "delta": {"content": "Half"}}]}\n\n'),
    ],
    ids=["not-json", "html", "empty", "never-finished"],
)
def test_garbage_is_asked_once_more_then_fails_with_a_sentence(stub, garbage) -> None:
    stub.replies.append(garbage)
    with pytest.raises(ModelServerError) as caught:
        _model(stub.base_url).complete(ASK, max_new_tokens=4)
    assert caught.value.code == "model_server_bad_reply" and len(stub.requests) == 2
    assert caught.value.sentence.startswith(f"The model server at 127.0.0.1:{stub.port} gave a")

    stub.replies.clear()
    stub.replies.extend([garbage, chunks("Fine.")])
    assert _model(stub.base_url).complete(ASK, max_new_tokens=4).text == "Fine."


def test_a_reply_cut_by_the_length_limit_says_so(stub) -> None:
    stub.replies.append(chunks("The governing law is", finish_reason="length"))
    model = _model(stub.base_url)
    completion = model.complete(ASK, max_new_tokens=4)
    assert completion.stats["finish_reason"] == "length" and completion.stats["cut_by_length"]
    calls = CallLog(model)
    assert calls.run("answer", ASK, max_new_tokens=4) == "The governing law is"
    assert calls.stats()["num_cut_by_length"] == 1  # what a result stores says so


def test_a_server_that_is_down_is_named_in_the_sentence() -> None:
    port = closed_port()
    with pytest.raises(ModelServerError) as caught:
        _model(f"http://127.0.0.1:{port}/v1", model="m").complete(ASK, max_new_tokens=4)
    assert caught.value.code == "model_server_down"
    assert caught.value.sentence.startswith(f"The model server at 127.0.0.1:{port} did not answer")


def test_json_schema_output_one_retry_then_plain_text(stub) -> None:
    stub.replies.extend([chunks("Vermont"), chunks('{"answer": "Vermont"}')])
    model = _model(stub.base_url)
    completion = model.complete(ASK, max_new_tokens=8, response_schema=SCHEMA)
    assert completion.text == '{"answer": "Vermont"}' and completion.stats["structured"]
    format_ = stub.requests[0][1]["response_format"]
    assert format_["type"] == "json_schema" and format_["json_schema"]["schema"] == SCHEMA

    stub.replies.clear()
    stub.replies.append(chunks("Vermont"))  # never JSON: after one retry, the text for our parsing
    completion = model.complete(ASK, max_new_tokens=8, response_schema=SCHEMA)
    assert completion.text == "Vermont" and completion.stats["structured"] is False
    assert len(stub.requests) == 4


def test_a_server_without_json_schema_is_asked_in_plain_text(stub) -> None:
    stub.replies.extend(
        [error(400, "response_format json_schema is not supported"), chunks("Ohio")]
    )
    model = _model(stub.base_url, structured_output="json_schema")
    assert model.complete(ASK, max_new_tokens=8, response_schema=SCHEMA).text == "Ohio"
    assert "response_format" not in stub.requests[1][1]
    model.complete(ASK, max_new_tokens=8, response_schema=SCHEMA)
    assert "response_format" not in stub.requests[2][1]  # remembered


def test_auto_asks_in_llamacpps_shape_once_openais_is_refused_then_in_plain_text(stub) -> None:
    # A server that refuses both shapes: OpenAI's, then llama.cpp's, then plain text for good.
    refusal = error(400, "response_format type is not supported")
    stub.replies.extend([refusal, refusal, chunks("Ohio")])
    model = _model(stub.base_url)
    assert model.complete(ASK, max_new_tokens=8, response_schema=SCHEMA).text == "Ohio"
    formats = [body.get("response_format") for _headers, body in stub.requests]
    assert [f and f["type"] for f in formats] == ["json_schema", "json_object", None]
    model.complete(ASK, max_new_tokens=8, response_schema=SCHEMA)
    assert "response_format" not in stub.requests[3][1]  # remembered


def test_requests_go_together_up_to_the_concurrency_in_order(stub) -> None:
    stub.replies.append(chunks("Same."))
    conversations = [[{"role": "user", "content": f"Section {i}"}] for i in range(5)]
    texts = [
        c.text
        for c in _model(stub.base_url, concurrency=3).complete_many(conversations, max_new_tokens=4)
    ]
    assert texts == ["Same."] * 5
    assert sorted(body["messages"][0]["content"] for _, body in stub.requests) == [
        f"Section {i}" for i in range(5)
    ]


def test_a_question_takes_the_next_free_slot_before_batch_work() -> None:
    slots = RequestSlots(1)
    slots.acquire(PRIORITY_BATCH)
    order: list[str] = []

    def take(name: str, priority: int) -> None:
        slots.acquire(priority)
        order.append(name)
        slots.release()

    batch = threading.Thread(target=take, args=("batch", PRIORITY_BATCH))
    batch.start()
    while not slots._waiting:
        threading.Event().wait(0.001)
    question = threading.Thread(target=take, args=("question", PRIORITY_INTERACTIVE))
    question.start()
    while len(slots._waiting) < 2:
        threading.Event().wait(0.001)
    slots.release()
    batch.join(5)
    question.join(5)
    assert order == ["question", "batch"]


def test_health_checks_the_server_and_the_model_name(stub) -> None:
    good = Settings(llm_base_url=stub.base_url, llm_model="stub-model")
    check = check_model_server(good)
    assert check.is_ok and "serves stub-model (4096 tokens of context)" in check.sentence

    wrong = check_model_server(Settings(llm_base_url=stub.base_url, llm_model="llama"))
    assert not wrong.is_ok and "does not serve 'llama'" in wrong.sentence

    down = check_model_server(Settings(llm_base_url=f"http://127.0.0.1:{closed_port()}/v1"))
    assert not down.is_ok and "did not answer" in down.sentence


def test_the_key_file_is_read_when_no_key_is_set(tmp_path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    settings = Settings(llm_base_url="http://gpu-box:8000/v1", llm_api_key_file=key_file)
    assert settings.llm_key() == "from-file" and "from-file" not in repr(settings)
    assert Settings(llm_base_url="http://x/v1", llm_api_key="k").llm_key() == "k"
    assert "'k'" not in repr(Settings(llm_api_key="k"))


# --- A job through the client: the server down fails it with the sentence; run again, it works.


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def test_a_summary_job_fails_while_the_server_is_down_and_succeeds_when_run_again(
    sessions, tmp_path, count_tokens, stub
) -> None:
    path = pdf_factory.text_pdf(tmp_path, ["Discharge summary.\nTake amoxicillin daily."])
    with sessions() as session:
        ingest = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name, "then_summarize": True},
        )
        session.commit()
    outcome = runner_ingest.run_ingest(
        ingest.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=32),
        count_tokens=count_tokens,
    )
    (summary_job,) = outcome.follow_up_job_ids
    engine_holder.reset()
    try:
        down = Settings(llm_base_url=f"http://127.0.0.1:{closed_port()}/v1", llm_model="stub-model")
        failed = summary_run.run_summary(
            summary_job,
            sessions=sessions,
            model_factory=lambda: engine_holder.get_chat_model(down),
            max_new_tokens=8,
        )
        with sessions() as session:
            job = session.get(Job, summary_job)
            assert failed.status == job_run.FAILED and job.error_code == "model_server_down"
            assert "did not answer" in job.error
            assert results.get_summary_for_job(session=session, job_id=summary_job) is None

        stub.replies.append(chunks("Amoxicillin daily. [p. 1]", usage={"completion_tokens": 5}))
        up = Settings(llm_base_url=stub.base_url)
        again = summary_run.run_summary(
            summary_job,
            sessions=sessions,
            model_factory=lambda: engine_holder.get_chat_model(up),
            max_new_tokens=8,
        )
    finally:
        engine_holder.reset()
    assert again.status == job_run.SUCCEEDED
    with sessions() as session:
        job = session.get(Job, summary_job)
        assert job.status == JobStatus.SUCCEEDED and job.stats["model"] == "stub-model"
        summary = results.get_summary_for_job(session=session, job_id=summary_job)
        assert summary is not None and "Amoxicillin" in summary.text


def test_with_a_base_url_the_worker_gets_the_client_and_builds_no_engine(stub) -> None:
    settings = Settings(llm_base_url=stub.base_url, llm_concurrency=2)
    engine_holder.reset()
    try:
        batch = engine_holder.get_chat_model(settings, time_limit_s=60)
        question = engine_holder.get_chat_model(settings, priority=PRIORITY_INTERACTIVE)
        assert isinstance(batch, OpenAIChatModel) and engine_holder._model is None
        assert batch._shared is question._shared  # one set of connections and slots
        assert (batch.priority, question.priority) == (PRIORITY_BATCH, PRIORITY_INTERACTIVE)
        assert batch.deadline is not None and question.deadline is None
    finally:
        engine_holder.reset()


def test_a_request_past_its_timeout_fails_with_a_sentence(stub) -> None:
    stub.replies.append(Reply(body=chunks("Late.").body, delay_s=3.0))
    with pytest.raises(ModelServerError) as caught:
        _model(stub.base_url, model="m", timeout_s=0.5).complete(ASK, max_new_tokens=4)
    assert (
        caught.value.code == "model_server_timeout"
        and "did not answer within" in caught.value.sentence
    )


def test_longdoc_health_names_the_model_server_and_its_model(cli_env, monkeypatch, stub) -> None:
    from typer.testing import CliRunner

    from worker.cli import cli

    monkeypatch.setenv("LONGDOC_LLM_BASE_URL", stub.base_url)
    monkeypatch.setenv("LONGDOC_LLM_MODEL", "stub-model")
    monkeypatch.setenv("LONGDOC_LLM_API_KEY", "sekret-health")
    get_settings.cache_clear()
    healthy = CliRunner().invoke(cli, ["health", "--no-worker"])
    assert healthy.exit_code == 0, healthy.output
    assert "model server: ok" in healthy.output and "serves stub-model" in healthy.output
    assert stub.requests == [] and "sekret-health" not in healthy.output

    monkeypatch.setenv("LONGDOC_LLM_MODEL", "llama")
    get_settings.cache_clear()
    wrong = CliRunner().invoke(cli, ["health", "--no-worker"])
    assert wrong.exit_code == 1 and "does not serve 'llama'" in wrong.output
    assert "the model server check failed" in wrong.output
