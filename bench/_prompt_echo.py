"""Whether a stored text repeats our prompts: any run of ECHO_WORDS words that also occurs in a
prompt template, or a placeholder phrase a small model copies from its instructions.

The prompts are the pipelines' own list (pipelines.prompts.texts.prompt_texts: every prompt
rendered with an empty document, so only the instructions' own words are in them), taken from
the checkout that runs; a prompt that cannot be rendered there is named in `unavailable` rather
than failing (the self-test then fails).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

ECHO_WORDS = 6
PLACEHOLDERS = ("Paste your answer here", "This is one part of a longer")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


@dataclass(frozen=True)
class PromptPhrases:
    grams: frozenset[tuple[str, ...]]
    sources: tuple[str, ...]  # the templates rendered
    unavailable: tuple[str, ...]  # templates that could not be rendered, with the reason


def _words(text: str) -> list[str]:
    return [word.casefold() for word in _WORD.findall(text)]


def _grams(text: str, n: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _contents(messages: Iterable[dict[str, str]]) -> str:
    return "\n".join(message["content"] for message in messages)


def _renderers() -> dict[str, Callable[[], str]]:
    """Every instruction prompt the pipelines send (pipelines.prompts.texts: the system prompts,
    each template's one-pass, section and combine tasks, the question and collection tasks),
    from the same list the pipelines' own echo guard reads. Key-fact questions and example
    quotes are left out: their words are the documents' own subject."""
    from pipelines.prompts.texts import INSTRUCTIONS, prompt_texts

    return {
        prompt.name: (lambda text=prompt.text: text)
        for prompt in prompt_texts()
        if prompt.kind == INSTRUCTIONS
    }


def prompt_phrases() -> PromptPhrases:
    """Every ECHO_WORDS-word run of the rendered prompt templates."""
    grams: set[tuple[str, ...]] = set()
    sources, unavailable = [], []
    try:
        renderers = _renderers()
    except (ImportError, AttributeError) as error:
        return PromptPhrases(frozenset(), (), (f"pipelines prompts: {error}",))
    for name, render in renderers.items():
        try:
            grams |= _grams(render())
            sources.append(name)
        except (AttributeError, TypeError) as error:
            unavailable.append(f"{name}: {error}")
    return PromptPhrases(frozenset(grams), tuple(sources), tuple(unavailable))


def echoes(text: str, phrases: PromptPhrases) -> list[str]:
    """The prompt phrases and placeholders `text` repeats (prompt words, never the document's)."""
    found = [" ".join(gram) for gram in sorted(_grams(text) & phrases.grams)]
    folded = " ".join(_words(text))
    found += [p for p in PLACEHOLDERS if " ".join(_words(p)) in folded]
    return found


def summary_echoes(summary: dict, phrases: PromptPhrases) -> dict[str, list[str]]:
    """Per stored part of a summary entry (bench/quality.py's: its lead lines, its checked
    sentences, the model's raw text): the prompt phrases it repeats, each line on its own."""
    parts = {
        "lead": list(summary.get("lead", ())),
        "sentences": [s["text"] for s in summary.get("sentences", ())],
        "model text": [summary.get("text", "")],
    }
    return {
        name: sorted({phrase for text in texts for phrase in echoes(text, phrases)})
        for name, texts in parts.items()
    }
