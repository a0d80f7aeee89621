"""What llama.cpp's servers do that others do not, against the local stub acting as them (each
seen on the real servers: tests/worker/model/test_llamacpp_server.py runs llama-cpp-python's):
llama-cpp-python's server refuses OpenAI's schema shape and gives no context length, cuts a
stream short when another request comes, and ends a stream with nothing in it where a prompt
is past its context; llama.cpp's llama-server gives its context as `meta.n_ctx`."""

from __future__ import annotations

import threading

import pytest

from tests.worker.model.model_server_stub import Reply, chunks, error, stub_server
from worker.model.openai_client import OpenAIChatModel
from worker.model.server_api import ModelServerError, ServerConfig, check_server, context_length
from worker.model.structured_output import AUTO, JSON_SCHEMA, LLAMACPP, request_fields

ASK = [{"role": "user", "content": "What law governs?"}]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
JSON_REPLY, PLAIN_REPLY = '{"answer": "Oregon"}', "Oregon law."
# llama-cpp-python's server's 400 for a prompt past its context (llama_cpp/server/errors.py).
CONTEXT_ERROR = (
    "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens "
    "(2990 in the messages, 10 in the completion). Please reduce the length of the messages "
    "or completion."
)


@pytest.fixture
def stub():
    with stub_server() as server:
        yield server


def _model(base_url: str, sleeps: list[float] | None = None, **config) -> OpenAIChatModel:
    values = {"max_retries": 3, "timeout_s": 10.0, "backoff_s": 0.5, "backoff_max_s": 2.0}
    values.update(config)
    recorder = sleeps.append if sleeps is not None else (lambda _s: None)
    return OpenAIChatModel(ServerConfig(base_url, **values), sleep=recorder)


def _types(stub) -> list[str | None]:
    return [(body.get("response_format") or {}).get("type") for _headers, body in stub.requests]


def test_auto_reaches_llama_cpp_pythons_server_in_llamacpps_shape_after_one_refusal(stub) -> None:
    # It lists itself as owned_by "me" and refuses type json_schema with a 500: AUTO asks it
    # in OpenAI's shape once, then in llama.cpp's, which it follows, from then on.
    stub.serve_as("llama-cpp-python", json_reply=chunks(JSON_REPLY))
    stub.replies.append(chunks(PLAIN_REPLY))
    model = _model(stub.base_url, structured_output=AUTO)

    first = model.complete(ASK, max_new_tokens=16, response_schema=SCHEMA)
    second = model.complete(ASK, max_new_tokens=16, response_schema=SCHEMA)

    assert (first.text, first.stats["structured"]) == (JSON_REPLY, True)
    assert (second.text, second.stats["structured"]) == (JSON_REPLY, True)
    assert _types(stub) == ["json_schema", "json_object", "json_object"]
    assert stub.schemas_read == [None, SCHEMA, SCHEMA]
    body = stub.requests[1][1]
    assert {k: body[k] for k in request_fields(LLAMACPP, SCHEMA)} == request_fields(
        LLAMACPP, SCHEMA
    )


def test_json_schema_set_outright_is_not_changed_for_llamacpps_shape(stub) -> None:
    stub.serve_as("llama-cpp-python", json_reply=chunks(JSON_REPLY))
    stub.replies.append(chunks(PLAIN_REPLY))
    model = _model(stub.base_url, structured_output=JSON_SCHEMA)

    completion = model.complete(ASK, max_new_tokens=16, response_schema=SCHEMA)

    assert completion.text == PLAIN_REPLY and _types(stub) == ["json_schema", None]
    # The JSON's wrapping has tokens of its own; plain text gets the limit asked for.
    assert [body["max_tokens"] for _headers, body in stub.requests] == [16 + 16, 16]


def test_the_token_limit_grows_by_the_wrapping_of_the_schemas_json() -> None:
    from pipelines.collection.table_reply import ROW_SCHEMA
    from pipelines.facts.prompts import ANSWER_SCHEMA
    from worker.model.structured_output import wrapping_tokens

    assert (wrapping_tokens(ANSWER_SCHEMA), wrapping_tokens(ROW_SCHEMA)) == (16, 32)
    assert wrapping_tokens({"type": "object"}) == 16


def test_concurrent_refusals_move_on_one_shape_only(stub) -> None:
    # Eight requests refused at once in OpenAI's shape: all go on in llama.cpp's, none in
    # plain text (a refusal of a shape already left changes nothing).
    stub.serve_as("llama-cpp-python", json_reply=chunks(JSON_REPLY))
    stub.replies.append(chunks(PLAIN_REPLY))
    model = _model(stub.base_url, structured_output=AUTO, concurrency=8)

    replies = model.complete_many([ASK] * 8, max_new_tokens=16, response_schema=SCHEMA)

    assert all(r.stats["structured"] for r in replies)
    assert model._shared.structured_output == LLAMACPP and model._shared.takes_schema
    assert _types(stub).count("json_object") == 8


def test_a_stream_cut_for_another_request_is_asked_again_one_at_a_time(stub) -> None:
    # llama-cpp-python's server (interrupt_requests, its default) ends a stream with [DONE]
    # and no finish_reason when another request waits: it is asked again, and from then on
    # this process sends it one request at a time.
    stub.replies.extend([chunks("Oregon", finish_reason=None), chunks(PLAIN_REPLY)])
    sleeps: list[float] = []
    model = _model(stub.base_url, sleeps, concurrency=4)

    completion = model.complete(ASK, max_new_tokens=8)

    assert completion.text == PLAIN_REPLY and len(stub.requests) == 2
    assert len(sleeps) == 1 and 0.25 <= sleeps[0] <= 0.5  # backed off as from a busy server
    assert (model._shared.slots.size, model._shared.slots.free) == (1, 1)


def test_streams_cut_every_time_end_in_a_sentence(stub) -> None:
    stub.replies.append(chunks("Oregon", finish_reason=None))
    with pytest.raises(ModelServerError) as caught:
        _model(stub.base_url, max_retries=2).complete(ASK, max_new_tokens=8)
    assert (
        caught.value.code == "model_server_busy" and "cut its reply short" in caught.value.sentence
    )
    assert len(stub.requests) == 3


def test_narrowed_slots_let_the_requests_under_way_end_first() -> None:
    from worker.model.server_shared import RequestSlots

    slots = RequestSlots(3)
    slots.acquire(0)
    slots.acquire(0)
    assert slots.narrow_to_one() and not slots.narrow_to_one()
    entered = threading.Event()

    def take() -> None:
        slots.acquire(0)
        entered.set()

    waiter = threading.Thread(target=take)
    waiter.start()
    slots.release()
    assert not entered.wait(0.05)  # one request is still under way
    slots.release()
    waiter.join(5)
    assert entered.is_set() and slots.free == 0


def test_an_empty_stream_is_asked_again_unstreamed_and_its_context_error_told(stub) -> None:
    # llama-cpp-python's server streams nothing at all for a prompt past its context; asked
    # unstreamed, it answers 400 context_length_exceeded.
    empty = Reply(body=b"", content_type="text/event-stream")
    refused = error(400, CONTEXT_ERROR)
    stub.replies.extend([empty, refused])

    with pytest.raises(ModelServerError) as caught:
        _model(stub.base_url, model="m").complete(ASK, max_new_tokens=8)

    assert caught.value.code == "model_server_context"
    assert "LONGDOC_LLM_CONTEXT_TOKENS" in caught.value.sentence
    (_h1, first), (_h2, second) = stub.requests
    assert first["stream"] is True and second["stream"] is False
    assert "stream_options" not in second


def test_an_empty_stream_then_an_unstreamed_reply_is_read(stub) -> None:
    unstreamed = Reply(
        body=b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "Ohio"},'
        b' "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}',
        content_type="application/json",
    )
    stub.replies.extend([Reply(body=b"", content_type="text/event-stream"), unstreamed])

    completion = _model(stub.base_url, model="m").complete(ASK, max_new_tokens=8)

    assert completion.text == "Ohio" and completion.stats["tokens_counted_by"] == "server"


def test_a_json_reply_cut_before_its_first_value_is_a_cut_reply_not_a_fault(stub) -> None:
    # llama-server streams the JSON a schema asks for as it parses it: cut by the token limit
    # before the first value, the stream has no text at all. Asked again it is the same.
    stub.replies.append(chunks("", finish_reason="length"))
    model = _model(stub.base_url, structured_output=LLAMACPP)

    completion = model.complete(ASK, max_new_tokens=4, response_schema=SCHEMA)

    assert completion.text == "" and completion.stats["cut_by_length"]
    assert completion.stats["structured"] is False and len(stub.requests) == 1
    # Without a schema, a reply without text stays a fault (asked once more, then a sentence).
    with pytest.raises(ModelServerError) as caught:
        model.complete(ASK, max_new_tokens=4)
    assert caught.value.code == "model_server_bad_reply" and len(stub.requests) == 3


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"id": "m", "max_model_len": 4096}, 4096),  # vLLM
        ({"id": "m", "owned_by": "llamacpp", "meta": {"n_ctx": 8192, "n_ctx_train": 131072}},
         8192),  # llama.cpp's llama-server: the slot's context, not the model's
        ({"id": "m", "owned_by": "llamacpp", "meta": {"n_ctx_train": 131072}}, None),
        ({"id": "m", "owned_by": "me", "permissions": []}, None),  # llama-cpp-python
        ({"id": "m", "meta": {"n_ctx": True}}, None),
    ],
)  # fmt: skip
def test_the_context_length_each_server_gives(entry: dict, expected: int | None) -> None:
    assert context_length(entry) == expected


def test_health_says_which_context_length_is_used_where_the_server_gives_none(stub) -> None:
    stub.models = [{"id": "gguf", "object": "model", "owned_by": "me", "permissions": []}]
    is_ok, sentence = check_server(ServerConfig(stub.base_url, context_tokens=2048))
    assert is_ok and "serves gguf" in sentence
    assert "LONGDOC_LLM_CONTEXT_TOKENS, 2048, is used" in sentence

    stub.models = [{"id": "gguf", "owned_by": "llamacpp", "meta": {"n_ctx": 4096}}]
    is_ok, sentence = check_server(ServerConfig(stub.base_url))
    assert is_ok and "serves gguf (4096 tokens of context)" in sentence
    assert _model(stub.base_url).max_context_tokens == 4096
