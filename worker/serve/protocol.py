"""The OpenAI-compatible API's requests, its responses (whole or as server-sent chunks) and its
errors, as OpenAI writes them.

Unknown fields are ignored (clients send many); the ones that would change the answer and that
the engine cannot honour (n > 1, logprobs, tools, a JSON response format) are refused with a
400 naming the field, rather than silently dropped.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.request import FINISH_LENGTH, GenerationResult


class ApiError(Exception):
    """An error answered as {"error": {"message", "type", "param", "code"}} with its status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = (
            status,
            message,
            type,
            param,
            code,
        )

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = ""
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    # vLLM's extension: write max_tokens tokens whatever the model says (benchmarks).
    ignore_eos: bool = False
    logprobs: Any = None
    user: str | None = None

    def stop_strings(self) -> tuple[str, ...]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or ())
        if len(stops) > 4:
            raise ApiError(400, "Give at most 4 stop sequences.", param="stop")
        if any(not text for text in stops):
            raise ApiError(400, "A stop sequence may not be empty.", param="stop")
        return tuple(stops)

    def check_supported(self) -> None:
        if self.n != 1:
            raise ApiError(400, "Only n=1 is supported: send one request per choice.", param="n")
        if self.logprobs not in (None, False, 0):
            raise ApiError(400, "logprobs are not supported by this server.", param="logprobs")

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    text: str = ""


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        for part in self.content:
            if part.type != "text":
                raise ApiError(
                    400, f"Message parts of type {part.type!r} are not supported: send text."
                )
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(_Request):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    tools: list[Any] | None = None
    response_format: dict[str, Any] | None = None

    def check_supported(self) -> None:
        super().check_supported()
        if self.tools:
            raise ApiError(400, "Tools are not supported by this server.", param="tools")
        if self.response_format and self.response_format.get("type", "text") != "text":
            raise ApiError(
                400,
                "Only the text response format is supported by this server.",
                param="response_format",
            )

    def chat(self) -> list[dict[str, str]]:
        # The chat templates know system, user and assistant; OpenAI's "developer" is a system.
        return [
            {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
            for m in self.messages
        ]

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(_Request):
    prompt: str | list[str] | list[int] = Field(min_length=1)
    echo: bool = False
    suffix: str | None = None

    def check_supported(self) -> None:
        super().check_supported()
        if self.echo:
            raise ApiError(400, "echo is not supported by this server.", param="echo")
        if self.suffix:
            raise ApiError(400, "suffix is not supported by this server.", param="suffix")
        is_texts = isinstance(self.prompt, list) and isinstance(self.prompt[0], str)
        if is_texts and len(self.prompt) != 1:
            raise ApiError(400, "Send one prompt per request.", param="prompt")

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_tokens


def parse(model: type[_Request], data: Any) -> Any:
    """The request, or a 400 naming the first field that is wrong."""
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    try:
        request = model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        raise ApiError(
            400, f"{param}: {first['msg']}" if param else first["msg"], param=param
        ) from None
    request.check_supported()
    return request


class Reply:
    """OpenAI's response objects for one request: whole, or chunk by chunk."""

    def __init__(self, kind: str, model: str, num_prompt: int) -> None:
        self.kind, self.model, self.num_prompt = kind, model, num_prompt
        prefix = "chatcmpl" if kind == "chat" else "cmpl"
        self.id = f"{prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.object = "chat.completion" if kind == "chat" else "text_completion"

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def usage(self, result: GenerationResult) -> dict[str, int]:
        completion = len(result.token_ids)
        return {
            "prompt_tokens": self.num_prompt,
            "completion_tokens": completion,
            "total_tokens": self.num_prompt + completion,
        }

    def whole(self, text: str, result: GenerationResult) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason(result)}
        if self.kind == "chat":
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice.update(text=text, logprobs=None)
        choice["logprobs"] = None
        return {**self._head(self.object), "choices": [choice], "usage": self.usage(result)}

    def chunk(
        self, content: dict[str, Any] | str, finish: str | None, include_usage: bool
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
        if self.kind == "chat":
            choice["delta"] = content
            obj = "chat.completion.chunk"
        else:
            choice["text"] = content
            obj = "text_completion"
        chunk = {**self._head(obj), "choices": [choice]}
        if include_usage:
            chunk["usage"] = None
        return chunk

    def piece(self, text: str, include_usage: bool) -> dict[str, Any]:
        content = {"content": text} if self.kind == "chat" else text
        return self.chunk(content, None, include_usage)

    def last(self, result: GenerationResult, include_usage: bool) -> dict[str, Any]:
        return self.chunk({} if self.kind == "chat" else "", finish_reason(result), include_usage)

    def usage_chunk(self, result: GenerationResult) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {**self._head(obj), "choices": [], "usage": self.usage(result)}


def finish_reason(result: GenerationResult) -> str:
    """OpenAI's finish reasons: "length" at max_tokens, else "stop"."""
    return "length" if result.finish_reason == FINISH_LENGTH else "stop"


def sse_event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"
