"""Structured output in each server family's own request shape
(worker/model/structured_output.py): the body of each mode, the family told from /v1/models,
and the client against the local stub acting as vLLM, Ollama and llama.cpp, each reading the
request's fields as that server does."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.settings import Settings
from tests.worker.model.model_server_stub import chunks, stub_server
from worker.model.openai_client import OpenAIChatModel
from worker.model.server_api import ServerConfig
from worker.model.structured_output import (
    AUTO,
    JSON_SCHEMA,
    LLAMACPP,
    OFF,
    request_fields,
    resolve,
)

ASK = [{"role": "user", "content": "What law governs?"}]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
JSON_REPLY, PLAIN_REPLY = '{"answer": "Oregon"}', "Oregon law."


@pytest.fixture
def stub():
    with stub_server() as server:
        yield server


def _model(base_url: str, mode: str) -> OpenAIChatModel:
    config = ServerConfig(base_url, structured_output=mode, max_retries=2, timeout_s=10.0)
    return OpenAIChatModel(config, sleep=lambda _s: None)


def test_each_mode_has_its_servers_body_shape() -> None:
    assert request_fields(JSON_SCHEMA, SCHEMA) == {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
        }
    }
    assert request_fields(LLAMACPP, SCHEMA) == {
        "response_format": {"type": "json_object", "schema": SCHEMA},
        "json_schema": SCHEMA,
    }
    assert request_fields(OFF, SCHEMA) == {}
    with pytest.raises(ValueError, match="auto"):
        request_fields(AUTO, SCHEMA)  # resolved from the server first


@pytest.mark.parametrize(
    ("owned_by", "expected"),
    [("llamacpp", LLAMACPP), ("vllm", JSON_SCHEMA), ("sglang", JSON_SCHEMA),
     ("library", JSON_SCHEMA), ("", JSON_SCHEMA)],
)  # fmt: skip
def test_auto_tells_the_server_family_by_owned_by(owned_by: str, expected: str) -> None:
    listed = [{"id": "other", "owned_by": "vllm"}, {"id": "m", "owned_by": owned_by}]
    assert resolve(AUTO, listed, "m") == expected
    assert resolve(AUTO, [], None) == JSON_SCHEMA
    assert resolve(LLAMACPP, [{"id": "m", "owned_by": "vllm"}], "m") == LLAMACPP  # as set
    with pytest.raises(ValueError, match="unknown"):
        resolve("grammar", listed, "m")


def test_the_setting_reaches_the_client_and_refuses_unknown_modes() -> None:
    settings = Settings(llm_base_url="http://gpu-box:8000/v1", llm_structured_output="llamacpp")
    assert ServerConfig.from_settings(settings).structured_output == LLAMACPP
    assert ServerConfig.from_settings(Settings()).structured_output == AUTO
    with pytest.raises(ValidationError):
        Settings(llm_structured_output="grammar")


@pytest.mark.parametrize(
    ("kind", "shape"),
    [("vllm", JSON_SCHEMA), ("ollama", JSON_SCHEMA), ("llamacpp", LLAMACPP),
     ("llamacpp-old", LLAMACPP)],
)  # fmt: skip
def test_auto_sends_each_server_the_shape_it_reads_and_gets_json(stub, kind, shape) -> None:
    stub.serve_as(kind, json_reply=chunks(JSON_REPLY))
    stub.replies.append(chunks(PLAIN_REPLY))

    completion = _model(stub.base_url, AUTO).complete(
        ASK, max_new_tokens=16, response_schema=SCHEMA
    )

    assert (completion.text, completion.stats["structured"]) == (JSON_REPLY, True)
    assert stub.schemas_read == [SCHEMA]  # the server saw the schema, at the first request
    ((_headers, body),) = stub.requests
    assert {k: body[k] for k in request_fields(shape, SCHEMA)} == request_fields(shape, SCHEMA)


@pytest.mark.parametrize("kind", ["llamacpp-old", "vllm"])
def test_a_shape_the_server_refuses_is_asked_again_in_plain_text(stub, kind) -> None:
    # An old llama.cpp refuses OpenAI's shape (with a 500 naming response_format); vLLM
    # refuses llama.cpp's: the request goes again without a schema, and later ones too.
    stub.serve_as(kind, json_reply=chunks(JSON_REPLY))
    stub.replies.append(chunks(PLAIN_REPLY))
    mode = JSON_SCHEMA if kind == "llamacpp-old" else LLAMACPP
    model = _model(stub.base_url, mode)

    first = model.complete(ASK, max_new_tokens=16, response_schema=SCHEMA)
    second = model.complete(ASK, max_new_tokens=16, response_schema=SCHEMA)

    assert first.text == second.text == PLAIN_REPLY
    bodies = [body for _headers, body in stub.requests]
    assert ["response_format" in body for body in bodies] == [True, False, False]


def test_a_schema_ollama_does_not_read_costs_a_retry_then_plain_text(stub) -> None:
    # Ollama ignores fields it does not know: llama.cpp's shape reaches it as no schema at all.
    stub.serve_as("ollama", json_reply=chunks(JSON_REPLY))
    stub.replies.append(chunks(PLAIN_REPLY))

    completion = _model(stub.base_url, LLAMACPP).complete(
        ASK, max_new_tokens=16, response_schema=SCHEMA
    )

    assert (completion.text, completion.stats["structured"]) == (PLAIN_REPLY, False)
    assert stub.schemas_read == [None, None]  # asked once more, then read as plain text


def test_off_never_sends_a_schema(stub) -> None:
    stub.serve_as("llamacpp", json_reply=chunks(JSON_REPLY))
    stub.replies.append(chunks(PLAIN_REPLY))

    completion = _model(stub.base_url, OFF).complete(ASK, max_new_tokens=16, response_schema=SCHEMA)

    assert completion.text == PLAIN_REPLY and "structured" not in completion.stats
    ((_headers, body),) = stub.requests
    assert "response_format" not in body and "json_schema" not in body


def test_a_json_reply_cut_by_the_token_limit_is_not_asked_again_nor_taken_for_plain_text(
    stub,
) -> None:
    # Asked again, greedy decoding cuts it at the same place; and it says nothing of whether
    # the server follows the schema, so the schema is still sent afterwards.
    stub.replies.append(chunks('{"answer": "The laws of', finish_reason="length"))
    model = _model(stub.base_url, JSON_SCHEMA)

    replies = [model.complete(ASK, max_new_tokens=4, response_schema=SCHEMA) for _ in range(3)]

    assert {(r.text, r.stats["finish_reason"]) for r in replies} == {
        ('{"answer": "The laws of', "length")
    }
    assert ["response_format" in body for _headers, body in stub.requests] == [True] * 3
