"""The official `openai` client against a real `longdoc serve` (the default model, on the CPU):
chat and completions, streaming and not, usage, errors, a bounded concurrent load, and a client
that leaves mid-stream. One server for the whole file; max_tokens small."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from tests.worker import celery_support
from tests.worker.model.real_server import free_port, real_server

KEY, OTHER_KEY = "test-key-one", "test-key-two"
MAX_TOKENS_CAP = 600
MAX_BODY_BYTES = 200_000
PER_KEY = 8


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log_path: Path

    def client(self, key: str = KEY) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=120)

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=10).json()


@pytest.fixture(scope="module")
def server(
    converted_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGDOC_")}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(celery_support.REPO), env.get("PYTHONPATH")])
    )
    env.update(
        LONGDOC_DATA_DIR=str(tmp / "data"),
        LONGDOC_MODEL_CACHE_DIR=str(converted_model_cache),
        LONGDOC_ENGINE_DEVICE="cpu",
        LONGDOC_ENGINE_NUM_THREADS="2",
        LONGDOC_SERVE_API_KEYS=f"{KEY}, {OTHER_KEY}",
        LONGDOC_SERVE_MAX_TOKENS=str(MAX_TOKENS_CAP),
        LONGDOC_SERVE_MAX_BODY_BYTES=str(MAX_BODY_BYTES),
        LONGDOC_SERVE_MAX_CONCURRENT_PER_KEY=str(PER_KEY),
    )
    port = free_port()
    log_path = tmp / "serve.log"
    with real_server(
        "longdoc serve",
        [celery_support.LONGDOC, "serve", "--port", str(port), "--log-level", "warning"],
        port=port,
        log_path=log_path,
        ready_path="/health",
        ready=lambda response: response.json()["status"] == "ok",
        env=env,
        cwd=tmp,
        start_new_session=True,
        grace_s=20,
    ) as started:
        yield Server(started.url, started.process, log_path)
    assert "Traceback" not in log_path.read_text()


def _model(server: Server) -> str:
    return server.client().models.list().data[0].id


def test_models_give_the_context_length(server: Server) -> None:
    body = httpx.get(
        f"{server.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=10
    ).json()
    (card,) = body["data"]
    assert card["id"] == "smollm2-135m-instruct"
    assert card["max_model_len"] >= 2048


def test_chat_streamed_and_whole_agree_with_usage(server: Server) -> None:
    client = server.client()
    messages = [{"role": "user", "content": "Name three colours."}]
    whole = client.chat.completions.create(
        model=_model(server), messages=messages, max_tokens=12, temperature=0
    )
    assert whole.choices[0].message.role == "assistant"
    text = whole.choices[0].message.content
    assert text and whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.prompt_tokens > 5 and 0 < whole.usage.completion_tokens <= 12
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens

    chunks = list(
        client.chat.completions.create(
            model=_model(server),
            messages=messages,
            max_tokens=12,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert streamed == text  # greedy, alone: the same answer either way
    assert finishes[-1] == whole.choices[0].finish_reason and not any(finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def test_completions_stop_seed_and_length(server: Server) -> None:
    client = server.client(OTHER_KEY)
    whole = client.completions.create(
        model=_model(server),
        prompt="1, 2, 3, 4,",
        max_tokens=8,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 8

    stopped = client.completions.create(
        model=_model(server), prompt="1, 2, 3, 4,", max_tokens=16, temperature=0, stop=[","]
    )
    assert "," not in stopped.choices[0].text and stopped.choices[0].finish_reason == "stop"

    sampled = [
        client.completions.create(
            model=_model(server),
            prompt="Once upon a time",
            max_tokens=10,
            temperature=1.0,
            top_p=0.9,
            seed=7,
        )
        .choices[0]
        .text
        for _ in range(2)
    ]
    assert sampled[0] == sampled[1]

    streamed = list(
        client.completions.create(
            model=_model(server),
            prompt="1, 2, 3, 4,",
            max_tokens=8,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
        )
    )
    assert "".join(c.choices[0].text for c in streamed) == whole.choices[0].text
    assert streamed[-1].choices[0].finish_reason == "length"


def test_errors_are_openai_errors(server: Server) -> None:
    model = _model(server)
    messages = [{"role": "user", "content": "Hi"}]
    with pytest.raises(openai.AuthenticationError) as wrong_key:
        server.client("not-a-key").chat.completions.create(model=model, messages=messages)
    assert wrong_key.value.body["code"] == "invalid_api_key"

    context = server.client().models.list().data[0].model_extra["max_model_len"]
    with pytest.raises(openai.BadRequestError) as too_long:
        server.client().chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "word " * (context + 10)}],
            max_tokens=8,
        )
    assert too_long.value.body["code"] == "context_length_exceeded"
    assert "maximum context length" in too_long.value.body["message"]

    with pytest.raises(openai.BadRequestError) as too_many:
        server.client().chat.completions.create(
            model=model, messages=messages, max_tokens=MAX_TOKENS_CAP + 1
        )
    assert too_many.value.body["param"] == "max_tokens"

    with pytest.raises(openai.BadRequestError) as bad_value:
        server.client().chat.completions.create(model=model, messages=messages, temperature=5)
    assert bad_value.value.body["param"] == "temperature"

    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    huge = httpx.post(
        f"{server.url}/v1/completions",
        content=b'{"prompt": "' + b"a" * MAX_BODY_BYTES + b'"}',
        headers=headers,
        timeout=30,
    )
    not_json = httpx.post(f"{server.url}/v1/completions", content=b"{", headers=headers)
    for response, status in ((huge, 413), (not_json, 400)):
        assert response.status_code == status
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
        assert "Traceback" not in response.text


def test_eight_concurrent_streams_all_complete(server: Server) -> None:
    client = server.client()
    model = _model(server)

    def ask(index: int) -> tuple[str, str | None, int]:
        chunks = list(
            client.chat.completions.create(
                model=model,
                messages=[
                    {
                        "role": "user",
                        "content": f"Write a word that starts with {'ABCDEFGH'[index]}.",
                    }
                ],
                max_tokens=12,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        return text, finish, chunks[-1].usage.completion_tokens

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))
    for text, finish, tokens in answers:
        assert text and finish in ("stop", "length") and 0 < tokens <= 12
    assert server.health()["running_requests"] == 0


def test_clients_that_leave_free_their_requests(server: Server) -> None:
    """Eight long streams fill the key's slots (a ninth gets 429); closed after their first
    token, they are aborted (counted as disconnected) and leave the engine long before the
    MAX_TOKENS_CAP steps that writing them to the end would take."""
    model = _model(server)
    before = _disconnected(server)
    steps_before = server.health()["engine_steps"]
    streams = [
        server.client().chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Tell me a long story."}],
            max_tokens=MAX_TOKENS_CAP,
            stream=True,
            extra_body={"ignore_eos": True},
        )
        for _ in range(PER_KEY)
    ]
    try:
        for stream in streams:
            next(iter(stream))
        assert server.health()["running_requests"] == PER_KEY
        with pytest.raises(openai.RateLimitError):
            server.client().chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
            )
        # Another key has its own slots.
        other = server.client(OTHER_KEY).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )
        assert other.choices[0].finish_reason in ("stop", "length")
    finally:
        for stream in streams:
            stream.close()
    deadline = time.monotonic() + 60
    while (health := server.health())["running_requests"] or health["engine_requests"]:
        assert time.monotonic() < deadline, health
        time.sleep(0.1)
    assert _disconnected(server) == before + PER_KEY
    assert health["engine_steps"] - steps_before < MAX_TOKENS_CAP // 2


def _disconnected(server: Server) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("longdoc_serve_requests_total{") and 'outcome="disconnected"' in line
    )


def test_a_client_that_leaves_before_a_whole_answer_frees_its_request(server: Server) -> None:
    """Not streaming: the server notices the closed connection while it waits, and aborts."""
    before = _disconnected(server)
    steps_before = server.health()["engine_steps"]
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            f"{server.url}/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "Tell me a long story."}],
                "max_tokens": MAX_TOKENS_CAP,
                "ignore_eos": True,
            },
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=0.5,
        )
    deadline = time.monotonic() + 60
    while (health := server.health())["running_requests"] or health["engine_requests"]:
        assert time.monotonic() < deadline, health
        time.sleep(0.1)
    assert _disconnected(server) == before + 1
    assert health["engine_steps"] - steps_before < MAX_TOKENS_CAP
