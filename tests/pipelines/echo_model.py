"""A deterministic stand-in for the ChatModel protocol, for control-flow tests of the pipelines.

It is honest about its input: tokens are whitespace words, a prompt over the context is refused
as an engine would, and its answer is the first sentence after each "[p. N]" (or "[Title, p. N]") page marker (or
each "Pages a-b:" label of a combine prompt) with that citation, so every word it returns comes
from the prompt. It mimics the engine's prefix cache: a prompt's leading tokens that repeat an
earlier prompt's count as cached. Real-model tests live in tests/worker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# "[p. 3]", or "[Supply Agreement, p. 3]" in a collection's prompt.
_MARKER = re.compile(
    r"^\[((?:[^\[\]\n]+, )?p\. \d+)\]\n(?!\n)(.*?)(?=\n\n|\Z)", re.DOTALL | re.MULTILINE
)
_LABEL = re.compile(r"^(Pages? \d+(?:-\d+)?): (.*)$", re.MULTILINE)
_FIRST_SENTENCE = re.compile(r".*?[.!?](?=\s|\Z)|.+", re.DOTALL)
CHUNK_TOKENS = 32


def first_sentence(text: str) -> str:
    match = _FIRST_SENTENCE.match(text.strip())
    return " ".join(match.group(0).split()) if match else ""


@dataclass
class EchoCompletion:
    text: str
    stats: dict


@dataclass
class EchoModel:
    max_context_tokens: int = 4096
    cite: bool = True  # False: like a small model that never cites a page
    extra_text: str = ""  # appended to every answer, e.g. a bogus citation
    name: str = "echo-test"
    prompts: list[list[dict[str, str]]] = field(default_factory=list)
    _seen: list[list[str]] = field(default_factory=list)

    def count_tokens(self, texts: Sequence[str], /) -> list[int]:
        return [len(text.split()) for text in texts]

    def _tokens(self, messages: Sequence[dict[str, str]]) -> list[str]:
        tokens = ["<s>"]
        for message in messages:
            tokens += [f"<{message['role']}>", *message["content"].split(), "</>"]
        return [*tokens, "<assistant>"]

    def count_chat_tokens(self, messages: Sequence[dict[str, str]], /) -> int:
        return len(self._tokens(messages))

    def complete(
        self, messages, *, max_new_tokens, on_progress=None, on_tokens=None
    ) -> EchoCompletion:
        tokens = self._tokens(messages)
        if len(tokens) + max_new_tokens > self.max_context_tokens:
            raise ValueError(f"prompt of {len(tokens)} tokens + {max_new_tokens} over the context")
        cached = max((_common_prefix(tokens, seen) for seen in self._seen), default=0)
        self._seen.append(tokens)
        self.prompts.append([dict(m) for m in messages])
        chunks = []
        for done in range(cached, len(tokens), CHUNK_TOKENS):
            chunks.append(min(CHUNK_TOKENS, len(tokens) - done))
            if on_progress is not None:
                on_progress(done + chunks[-1], len(tokens))
        text = self._answer(messages[-1]["content"])
        words = text.split()[:max_new_tokens]
        for written in range(1, len(words) + 1):  # one word a token, as it is written
            if on_tokens is not None:
                on_tokens(written, max_new_tokens)
        stats = {
            "num_prompt_tokens": len(tokens),
            "num_cached_tokens": cached,
            "chunk_sizes": chunks,
            "prefill_seconds": 0.001 * len(chunks),
            "num_decode_tokens": len(words),
            "decode_seconds": 0.001 * len(words),
            "finish_reason": "stop",
        }
        return EchoCompletion(" ".join(words), stats)

    def _answer(self, content: str) -> str:
        pieces = [(f"[{marker}]", first_sentence(t)) for marker, t in _MARKER.findall(content)]
        if not pieces:
            pieces = [(f"({label})", first_sentence(t)) for label, t in _LABEL.findall(content)]
        lines = [f"{sentence} {cite}" if self.cite else sentence for cite, sentence in pieces]
        return " ".join(lines) + self.extra_text


def _common_prefix(a: list[str], b: list[str]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def count_words(texts: Sequence[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def make_document(
    page_texts: Sequence[str],
    *,
    kind: str = "other",
    title: str | None = "Test",
    max_tokens: int = 40,
):
    """A DocumentInput whose passages come from the real splitter, counting words as tokens."""
    from pipelines.documents import PageText
    from pipelines.ingest.split import split_into_passages
    from pipelines.inputs import DocumentInput

    pages = tuple(PageText(n, text) for n, text in enumerate(page_texts, start=1))
    passages = split_into_passages(pages, count_tokens=count_words, max_tokens=max_tokens)
    return DocumentInput(title=title, kind=kind, pages=pages, passages=tuple(passages))


def filler_page(number: int, num_sentences: int = 6) -> str:
    """A page of distinct, checkable sentences: "Page 3 fact 1 concerns topic3x1 ...". No
    phrase of five words occurs twice in a document made of them (pipelines.repetition would
    take a third copy for a loop)."""
    sentences = [
        f"Page {number} fact {i} concerns topic{number}x{i} in plain words, as item{number}x{i}."
        for i in range(1, num_sentences + 1)
    ]
    half = num_sentences // 2
    return " ".join(sentences[:half]) + "\n\n" + " ".join(sentences[half:])
