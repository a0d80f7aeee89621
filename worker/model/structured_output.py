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
  llama-cpp-python's server (`python -m llama_cpp.server`, 0.3.x) reads only
  `response_format` of type "text" or "json_object" (its `schema` becomes a grammar; the
  top-level `json_schema` is ignored) and refuses "json_schema" with a 500 naming
  response_format.
- OFF: no schema is sent; replies are read as plain text by our own parsing.

AUTO picks LLAMACPP where /v1/models says the server is llama.cpp (`owned_by: "llamacpp"`),
else JSON_SCHEMA (vLLM answers "vllm", SGLang "sglang", Ollama the model's namespace, mostly
"library": all of them take OpenAI's shape). A server that refuses the shape AUTO picked is
asked in the next one of FALLBACK (llama-cpp-python's server says `owned_by: "me"`, and is
asked in LLAMACPP's shape once it refused OpenAI's); a shape set outright, or the last one,
refused falls back to plain text. What a server does with the fields is checked on its replies
either way (worker/model/openai_client.py): a reply that is not JSON falls back to plain text.
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
# The tokens of a JSON reply's wrapping per property, and once for the braces.
WRAPPING_TOKENS = 8
# Under AUTO, the shape to ask in after a server refused one.
FALLBACK = {JSON_SCHEMA: LLAMACPP}


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


def after_refusal(mode: str, refused: str) -> str:
    """The shape to ask in once the server refused the shape `refused`, under the setting
    `mode`: under AUTO the next one of FALLBACK, else (and after the last) OFF."""
    if mode == AUTO:
        return FALLBACK.get(refused, OFF)
    return OFF


def wrapping_tokens(schema: dict[str, Any]) -> int:
    """The tokens a JSON reply of `schema` spends around its values: braces, keys, quotes, and
    the whitespace a llama.cpp grammar lets a small model write (`{\\n  "answer" : "`). They
    are added to a request's token limit, so the values keep the limit the caller set for its
    words: without them a key fact's 4 to 24 tokens are spent before its value is written
    (llama-cpp-python's and llama-server's servers cut 11 and 12 of 13 contract key facts)."""
    properties = schema.get("properties")
    return WRAPPING_TOKENS * (1 + (len(properties) if isinstance(properties, dict) else 1))


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
