"""The model-server client against real llama.cpp servers serving the default GGUF file on the
CPU: llama-cpp-python's (`python -m llama_cpp.server`) where a Python with `llama_cpp.server` is
found (LONGDOC_TEST_LLAMACPP_PYTHON, else /work/llamacpp-venv's: a venv of its own, as
`pip install "llama-cpp-python[server]"` builds llama.cpp from source), and llama.cpp's own
`llama-server` where its binary is found (LONGDOC_TEST_LLAMA_SERVER, else
/work/llama.cpp-src/build/bin/llama-server); each is skipped, with the reason, otherwise.

What they show (the stub-based tests/worker/model/test_llamacpp_quirks.py acts it out):
llama-cpp-python's server lists the GGUF path, owned_by "me", no context length; its streams
carry no `usage`; it refuses response_format type "json_schema" (a 500) and follows
"json_object" with a `schema`; it cuts a stream when another request comes; a prompt past its
context streams nothing. llama-server lists owned_by "llamacpp" and its context as
`meta.n_ctx`, streams `usage`, takes both shapes, serves several requests at once, and refuses
a prompt past its context with a 400."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.settings import get_settings
from pipelines.collection.table_reply import ROW_SCHEMA
from pipelines.facts.fields import schema_for
from pipelines.facts.prompts import ANSWER_SCHEMA, field_messages
from pipelines.facts.reading import answer_from_reply
from pipelines.retrieval.evidence import Evidence
from tests.worker import celery_support
from tests.worker.model.real_server import free_port, real_server
from worker.model.openai_client import OpenAIChatModel
from worker.model.server_api import ModelServerError, ServerConfig
from worker.model.structured_output import AUTO, LLAMACPP

pytestmark = pytest.mark.slow
DEFAULT_PYTHON = Path("/work/llamacpp-venv/bin/python")
DEFAULT_LLAMA_SERVER = Path("/work/llama.cpp-src/build/bin/llama-server")
N_CTX = 2048
# The setting where the server gives no context length: not N_CTX, to tell them apart.
SETTING_CONTEXT = 1536
QUOTE = "This Agreement shall be governed by and construed in accordance with the laws of Oregon."
LLAMA_CPP_PYTHON, LLAMA_SERVER = "llama-cpp-python", "llama-server"


@dataclass(frozen=True)
class Served:
    kind: str
    base_url: str
    owned_by: str
    gives_context: bool  # its context length in /v1/models
    streams_usage: bool


def _llamacpp_python() -> str:
    """The Python that has llama_cpp.server, or a skip saying why there is none."""
    named = os.environ.get("LONGDOC_TEST_LLAMACPP_PYTHON")
    python = Path(named) if named else DEFAULT_PYTHON
    if not python.exists():
        pytest.skip(
            f"no llama-cpp-python server: {python} does not exist (set "
            "LONGDOC_TEST_LLAMACPP_PYTHON to a Python with "
            '`pip install "llama-cpp-python[server]"`)'
        )
    found = subprocess.run(
        [str(python), "-c", "import llama_cpp.server.app"], capture_output=True, timeout=120
    )
    if found.returncode != 0:
        pytest.skip(f"no llama-cpp-python server: {python} cannot import llama_cpp.server")
    return str(python)


def _llama_server() -> str:
    named = os.environ.get("LONGDOC_TEST_LLAMA_SERVER")
    binary = Path(named) if named else DEFAULT_LLAMA_SERVER
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"no llama-server: {binary} is not an executable (set LONGDOC_TEST_LLAMA_SERVER to "
            "llama.cpp's llama-server)"
        )
    return str(binary)


@pytest.fixture(scope="module", params=[LLAMA_CPP_PYTHON, LLAMA_SERVER])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The server of the param on a free port, stopped at the end."""
    gguf = str(celery_support.default_gguf())
    port = free_port()
    if request.param == LLAMA_CPP_PYTHON:
        command = [
            _llamacpp_python(), "-m", "llama_cpp.server", "--model", gguf,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX),
        ]  # fmt: skip
        expected = ("me", False, False)
    else:
        command = [
            _llama_server(), "-m", gguf, "--host", "127.0.0.1", "--port", str(port),
            "-c", str(N_CTX),
        ]  # fmt: skip
        expected = ("llamacpp", True, True)
    log_path = tmp_path_factory.mktemp("llamacpp") / f"{request.param}.log"
    with real_server(request.param, command, port=port, log_path=log_path) as server:
        yield Served(request.param, f"{server.url}/v1", *expected)


def _model(base_url: str, **config) -> OpenAIChatModel:
    values = {"timeout_s": 60.0, "context_tokens": SETTING_CONTEXT, "structured_output": AUTO}
    values.update(config)
    return OpenAIChatModel(ServerConfig(base_url, **values))


def _listed_context(served: Served) -> int:
    (entry,) = httpx.get(f"{served.base_url}/models", timeout=10).json()["data"]
    context = entry["meta"]["n_ctx"]
    assert 0 < context <= N_CTX
    return context


def _facts_messages() -> list[dict[str, str]]:
    spec = next(s for s in schema_for("contract") if s.name == "governing_law")
    return field_messages(spec, [Evidence(QUOTE, 1, 0, 0, len(QUOTE), 1.0)])


def test_a_chat_and_what_the_server_says_of_itself(served: Served) -> None:
    listed = httpx.get(f"{served.base_url}/models", timeout=10).json()["data"]
    assert [(e["id"].endswith(".gguf"), e["owned_by"]) for e in listed] == [(True, served.owned_by)]

    model = _model(served.base_url)
    completion = model.complete([{"role": "user", "content": "Name a colour."}], max_new_tokens=8)

    assert completion.text.strip()
    assert completion.stats["finish_reason"] in ("stop", "length")
    assert 0 < completion.stats["num_decode_tokens"] <= 8
    counted_by = "server" if served.streams_usage else "estimate"
    assert completion.stats["tokens_counted_by"] == counted_by
    # The server's context length where /v1/models gives it (a slot's: N_CTX, or a share of
    # it where a llama-server's slots do not share one cache), else the setting's.
    context = _listed_context(served) if served.gives_context else SETTING_CONTEXT
    assert (model.name, model.max_context_tokens) == (listed[0]["id"], context)


def test_streamed_chats_sent_together_each_complete(served: Served) -> None:
    # Three streams at once: llama-cpp-python's server cuts a stream when another request
    # comes (interrupt_requests); each is asked again, one at a time, and all three finish.
    model = _model(served.base_url, concurrency=3, max_retries=4, backoff_s=0.05, backoff_max_s=0.2)
    progress: list[tuple[int, int]] = []
    asks = [[{"role": "user", "content": f"Count to {n}."}] for n in (3, 4, 5)]

    replies = model.complete_many(
        asks, max_new_tokens=12, on_tokens=lambda w, m: progress.append((w, m))
    )

    assert all(r.text.strip() and r.stats["finish_reason"] in ("stop", "length") for r in replies)
    assert progress and progress[-1][1] == 36 and max(w for w, _ in progress) <= 36


def test_a_key_facts_request_gets_json_in_llamacpps_shape(served: Served) -> None:
    model = _model(served.base_url)

    completion = model.complete(_facts_messages(), max_new_tokens=48, response_schema=ANSWER_SCHEMA)

    answer, is_json = answer_from_reply(completion.text)
    assert is_json and completion.stats["structured"] is True and answer
    # llama-server is known by owned_by; llama-cpp-python's refused OpenAI's shape first.
    assert model._shared.structured_output == LLAMACPP and model._shared.takes_schema

    row = model.complete(
        [*_facts_messages()[:1], {"role": "user", "content": f"Page 3: {QUOTE}\nWhich law?"}],
        max_new_tokens=64,
        response_schema=ROW_SCHEMA,
    )
    # A table row: an integer page too. A row cut by the limit is read as it is.
    assert row.stats["structured"] or row.stats["finish_reason"] == "length"
    if row.stats["structured"]:
        value = json.loads(row.text)
        assert set(value) == {"answer", "page", "quote"} and isinstance(value["page"], int)


def test_a_prompt_past_the_servers_context_is_told_in_a_sentence(served: Served) -> None:
    # Told the server had more context than it has: llama-server refuses it with a 400;
    # llama-cpp-python's streams nothing, and asked again unstreamed names the limit.
    model = _model(served.base_url, context_tokens=8 * N_CTX)
    with pytest.raises(ModelServerError) as caught:
        model.complete([{"role": "user", "content": "cat dog " * N_CTX}], max_new_tokens=8)
    assert caught.value.code == "model_server_context"
    assert "LONGDOC_LLM_CONTEXT_TOKENS" in caught.value.sentence


def test_longdoc_health_checks_the_llamacpp_server(served: Served, cli_env, monkeypatch) -> None:
    from worker.cli import cli

    monkeypatch.setenv("LONGDOC_LLM_BASE_URL", served.base_url)
    monkeypatch.setenv("LONGDOC_LLM_CONTEXT_TOKENS", str(SETTING_CONTEXT))
    get_settings.cache_clear()
    healthy = CliRunner().invoke(cli, ["health", "--no-worker"])
    assert healthy.exit_code == 0, healthy.output
    output = " ".join(healthy.output.split())
    assert "model server: ok" in output and ".gguf" in output
    if served.gives_context:
        assert f"({_listed_context(served)} tokens of context)" in output
    else:
        assert f"LONGDOC_LLM_CONTEXT_TOKENS, {SETTING_CONTEXT}, is used" in output

    monkeypatch.setenv("LONGDOC_LLM_MODEL", "llama")
    get_settings.cache_clear()
    wrong = CliRunner().invoke(cli, ["health", "--no-worker"])
    assert wrong.exit_code == 1 and "does not serve 'llama'" in wrong.output
