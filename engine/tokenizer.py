"""The model's tokenizer as the engine uses it: chat prompts whose control strings stay text,
token counts, and the ids that end a sequence.

The engine holds one ChatTokenizer (LLMEngine.chat_tokenizer); its `tokenizer` is the Hugging
Face tokenizer itself, which the detokenizer and callers read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.loader import load_tokenizer

ZERO_WIDTH_SPACE = "\u200b"


class ChatTokenizer:
    def __init__(self, tokenizer: Any, eos_token_ids: frozenset[int]) -> None:
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids
        self.special_strings = _special_token_strings(tokenizer)

    @classmethod
    def load(cls, checkpoint_dir: Path) -> ChatTokenizer:
        """The tokenizer of a checkpoint folder, with the end-of-sequence ids its configs name."""
        tokenizer = load_tokenizer(checkpoint_dir)
        return cls(tokenizer, frozenset(_eos_token_ids(checkpoint_dir, tokenizer)))

    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a chat, ending with the assistant's turn prompt. A control string such
        as <|im_start|> inside a message's text (a document's, a question's) stays text: it is
        broken by a zero-width space, so it can never open a turn of its own."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise EngineError(
                "The checkpoint's tokenizer has no chat template (a base model rather than an "
                "instruct one?); the engine needs one to build its prompts."
            )
        safe = [{**m, "content": self._defuse(m.get("content", ""))} for m in messages]
        encoded = self.tokenizer.apply_chat_template(
            safe, add_generation_prompt=True, tokenize=True
        )
        return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)

    def _defuse(self, text: str) -> str:
        for special in self.special_strings:
            if special in text:
                text = text.replace(special, special[0] + ZERO_WIDTH_SPACE + special[1:])
        return text

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text without special tokens (what a passage costs in a prompt)."""
        if not texts:
            return []
        encoded = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in encoded]


def _special_token_strings(tokenizer: Any) -> tuple[str, ...]:
    """Every special token's text, longest first (so <|im_start|> goes before <|im|>)."""
    found = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(token, "special", False):
            found.add(str(token.content))
    return tuple(sorted((t for t in found if len(t) > 1), key=len, reverse=True))


def _eos_token_ids(folder: Path, tokenizer: Any) -> set[int]:
    """End-of-sequence ids from the tokenizer, config.json and generation_config.json."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    for name in ("generation_config.json", "config.json"):
        path = Path(folder) / name
        if path.is_file():
            value = json.loads(path.read_text()).get("eos_token_id")
            ids.update([value] if isinstance(value, int) else (value or []))
    return ids
