"""How a model server is asked for JSON that matches a schema: the request fields each server
family reads (LONGDOC_LLM_STRUCTURED_OUTPUT), and which family a server is, from /v1/models.

Every shape goes to the same `POST {base}/chat/completions`; only the fields differ:

- JSON_SCHEMA, OpenAI's shape: `response_format: {"type": "json_schema", "json_schema":
  {"name", "schema", "strict"}}`. vLLM and SGLang honour it; so does Ollama (0.5 and later)
  on its OpenAI-compatible /v1 endpoint, which hands `json_schema.schema` to the same
  grammar-constrained decoding as its native /api/chat `format` field (ollama openai/openai.go,
  FromChatRequest); and recent llama.cpp servers.
- LLAMACPP, llama.cpp's own: `response_format: {"type": "json_object", "schema": ...}` and the
  schema again as the top-level `json_schema` of its native /completion parameters. Every
  llama.cpp server version reads one of them; older ones refuse type "json_schema"
  ("response_format type must be one of \\"text\\" or \\"json_object\\"").
- OFF: no schema is sent; replies are read as plain text by our own parsing.

AUTO picks LLAMACPP where /v1/models says the server is llama.cpp (`owned_by: "llamacpp"`),
else JSON_SCHEMA (vLLM answers "vllm", SGLang "sglang", Ollama the model's namespace, mostly
"library": all of them take OpenAI's shape). What a server does with the fields is checked
on its replies either way (worker/model/openai_client.py): a refusal or a reply that is not
JSON falls back to plain text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

AUTO, JSON_SCHEMA, LLAMACPP, OFF = "auto", "json_schema", "llamacpp", "off"
MODES = (AUTO, JSON_SCHEMA, LLAMACPP, OFF)
# The schema's name in OpenAI's shape (required there; not shown to the model).
SCHEMA_NAME = "answer"
# What a server says of itself as `owned_by` in /v1/models, for the servers whose own shape
# is not OpenAI's.
_OWNED_BY = {"llamacpp": LLAMACPP}


def resolve(mode: str, listed: Sequence[dict[str, Any]], model: str | None) -> str:
    """The shape to send: `mode` itself unless AUTO; for AUTO, the shape of the server that
    lists `model` (else its first model), JSON_SCHEMA where it does not say."""
    if mode not in MODES:
        raise ValueError(f"unknown structured output mode {mode!r}; one of {', '.join(MODES)}")
    if mode != AUTO:
        return mode
    entry = next((m for m in listed if m.get("id") == model), listed[0] if listed else {})
    owner = str(entry.get("owned_by") or "").strip().lower()
    return _OWNED_BY.get(owner, JSON_SCHEMA)


def request_fields(mode: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The fields to add to a chat completion request's body asking for JSON by `schema`, in
    the shape `mode` (a resolved one, not AUTO) names; none for OFF."""
    if mode == JSON_SCHEMA:
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True},
            }
        }
    if mode == LLAMACPP:
        return {"response_format": {"type": "json_object", "schema": schema}, "json_schema": schema}
    if mode == OFF:
        return {}
    raise ValueError(f"no request shape for structured output mode {mode!r}")
