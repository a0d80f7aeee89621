"""A model server's reply as the jobs keep it (worker/model/openai_client.py): its text and the
engine's per-request stats, and whether its text is JSON that matches a schema."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import jsonschema

# Characters per token assumed without a tokenizer: fewer than any common tokenizer's average
# on English or code, so counts err high. Each chat message adds its template's few tokens.
CHARS_PER_TOKEN = 3


@dataclass(frozen=True)
class ServerCompletion:
    text: str
    stats: dict[str, Any] = field(default_factory=dict)

    def with_structured(self, structured: bool) -> ServerCompletion:
        """The same reply, its stats saying whether it was asked for and matched a schema."""
        return ServerCompletion(self.text, {**self.stats, "structured": structured})


def reply_stats(
    usage: dict[str, Any] | None,
    body: dict[str, Any],
    written: int,
    started: float,
    first_token_at: float | None,
    ended: float,
    finish_reason: str,
) -> dict[str, Any]:
    """The engine's per-request stats keys, from the server's usage where it gives it."""
    prompt_estimate = sum(
        math.ceil(len(m.get("content") or "") / CHARS_PER_TOKEN) for m in body["messages"]
    )
    usage = usage or {}
    details = usage.get("prompt_tokens_details") or {}
    prompt = usage.get("prompt_tokens")
    decoded = usage.get("completion_tokens")
    first = first_token_at if first_token_at is not None else ended
    decode_tokens = int(decoded) if isinstance(decoded, int) else written
    decode_seconds = max(0.0, ended - first)
    return {
        "backend": "openai",
        "num_prompt_tokens": int(prompt) if isinstance(prompt, int) else prompt_estimate,
        "num_cached_tokens": int(details.get("cached_tokens") or 0),
        "num_decode_tokens": decode_tokens,
        "tokens_counted_by": "server" if isinstance(decoded, int) else "estimate",
        "prefill_seconds": first - started,
        "time_to_first_token_seconds": first - started,
        "decode_seconds": decode_seconds,
        "decode_tokens_per_second": decode_tokens / decode_seconds if decode_seconds else None,
        "finish_reason": finish_reason,
    }


_NOT_JSON = object()


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return _NOT_JSON


def is_json(text: str) -> bool:
    return _json_value(text) is not _NOT_JSON


def matches_schema(text: str, schema: dict[str, Any]) -> bool:
    """Whether `text` is JSON valid against the schema (what a JSON-schema-guided server
    guarantees)."""
    value = _json_value(text)
    return value is not _NOT_JSON and jsonschema.Draft202012Validator(schema).is_valid(value)
