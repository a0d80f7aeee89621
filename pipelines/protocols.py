"""What the pipelines need from a model, as protocols: the worker passes in the engine's side of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class TokenCounter(Protocol):
    """Counts tokens of the model's tokenizer for each text (no special tokens)."""

    def __call__(self, texts: Sequence[str], /) -> list[int]: ...


class Completion(Protocol):
    """What a model returns for one prompt: the text and the engine's per-request stats."""

    text: str
    stats: dict


class ProgressCallback(Protocol):
    def __call__(self, done_tokens: int, total_tokens: int, /) -> None: ...


class TokenProgressCallback(Protocol):
    """Tokens the model has written so far in a call, out of the most it may write."""

    def __call__(self, written_tokens: int, max_tokens: int, /) -> None: ...


class ChatModel(Protocol):
    """The model as the pipelines see it: chat messages in, text out.

    The worker adapts the engine to this. Messages are {"role": "system"|"user"|"assistant",
    "content": str}. A prompt whose leading messages repeat an earlier prompt's (the same document
    as the prefix) is served from the engine's prefix cache, so put the document first.

    `response_schema`: a JSON schema the reply should match, for a short structured answer
    (a key fact, a table row). A model that can guide its output by one (a model server's
    `response_format`) does; one that cannot (our engine) ignores it. Either way the caller
    parses the reply as it comes, JSON or plain text.
    """

    @property
    def max_context_tokens(self) -> int: ...

    @property
    def name(self) -> str: ...

    def count_tokens(self, texts: Sequence[str], /) -> list[int]: ...

    def count_chat_tokens(self, messages: Sequence[dict[str, str]], /) -> int: ...

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> Completion: ...

    def complete_many(
        self,
        conversations: Sequence[Sequence[dict[str, str]]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> list[Completion]:
        """Independent prompts served together (the engine batches them); results in order."""
        ...


class Embedder(Protocol):
    """A sentence-embedding model: texts in, one unit-length float32 row per text out
    ([N, dimension] numpy array). The worker adapts a packaged model to this."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str], /) -> Any: ...
