"""Every prompt the pipelines send, rendered without a document: the words a model's summary or
answer must never give back as its own (pipelines.prompts.echo checks them).

Rendered from the same functions that build the real prompts, so a new template, topic, key-fact
field or instruction is covered the day it is added. Each prompt is one `PromptText`:

- INSTRUCTIONS: what we tell a summary or answer model (the system prompts, the one-pass, section
  and combine tasks of every template, the question tasks, the collection's task, the facts
  system prompt). Prose about the task: a sentence made of its words repeats it.
- QUESTION: a key-fact field's question ("Who are the parties in this case?"). Its words are the
  document's subject too ("the court issued the opinion"), so only a close repeat echoes it.
- EXAMPLE: a key-fact field's invented example quote. Document text in the genre's own words: only
  a near-copy echoes it, and only when the document does not hold those words itself.

`subject_words` are the words that name what documents are about (every template's label and
topics, every key-fact field's label): a sentence of those alone states the document's content,
not the prompt's, whatever prompt lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pipelines.facts import prompts as facts_prompts
from pipelines.facts.fields import SCHEMAS
from pipelines.prompts import collection as collection_prompts
from pipelines.prompts import quoted_question as answer_prompts
from pipelines.prompts.templates import (
    TEMPLATES,
    combine_messages,
    document_block,
    question_messages,
    section_messages,
    summary_messages,
)

INSTRUCTIONS, QUESTION, EXAMPLE = "instructions", "question", "example"
# Invented values for the parts of a prompt that vary: a section's pages, a combine prompt's
# title. prompt_echo leaves page references out on both sides, and the title is one letter,
# which it does not count as a word.
_PAGES = (4, 9)
_TITLE = "X"


@dataclass(frozen=True)
class PromptText:
    """One prompt's own words, lines as sent: `name` says which ("summary/contract/section")."""

    name: str
    kind: str  # INSTRUCTIONS | QUESTION | EXAMPLE
    text: str


def _own_words(messages: list[dict[str, str]]) -> str:
    """The system and user turns of a conversation rendered without a document, as one text."""
    return "\n".join(m["content"] for m in messages if m["role"] != "assistant")


def _summary_prompts() -> list[PromptText]:
    empty = document_block(None, "")
    found = []
    for template in TEMPLATES.values():
        conversations = {
            "summary": summary_messages(empty, template),
            "section": section_messages(empty, template, *_PAGES),
            "combine": combine_messages(_TITLE, template, []),
            "combine_untitled": combine_messages(None, template, []),
        }
        for step, messages in conversations.items():
            found.append(
                PromptText(f"summary/{template.name}/{step}", INSTRUCTIONS, _own_words(messages))
            )
    return found


def _question_prompts() -> list[PromptText]:
    empty = document_block(None, "")
    return [
        PromptText("question", INSTRUCTIONS, _own_words(question_messages(empty, ""))),
        PromptText(
            "quoted_question",
            INSTRUCTIONS,
            _own_words(answer_prompts.quoted_question_messages(empty, [], "")),
        ),
        PromptText(
            "collection",
            INSTRUCTIONS,
            _own_words(collection_prompts.answer_messages("", [], "")),
        ),
    ]


def _facts_prompts() -> list[PromptText]:
    found = [PromptText("facts/system", INSTRUCTIONS, facts_prompts.SYSTEM_PROMPT)]
    for subkind, schema in SCHEMAS.items():
        for spec in schema:
            messages = facts_prompts.field_messages(spec, [])
            asked = "\n".join(m["content"] for m in messages if m["role"] == "user")
            for number, (quote, _answer) in enumerate(spec.examples, start=1):
                found.append(PromptText(f"facts/{spec.name}/example{number}", EXAMPLE, quote))
                asked = asked.replace(quote, "\n")
            found.append(PromptText(f"facts/{subkind}/{spec.name}", QUESTION, asked))
    return found


@lru_cache(maxsize=1)
def prompt_texts() -> tuple[PromptText, ...]:
    """Every prompt of the pipelines without a document, each text once."""
    found: dict[str, PromptText] = {}
    for prompt in [*_summary_prompts(), *_question_prompts(), *_facts_prompts()]:
        found.setdefault(prompt.text, prompt)
    return tuple(found.values())


@lru_cache(maxsize=1)
def subject_words() -> str:
    """The words that name what documents are about (module docstring), as one text."""
    labels = [f"{t.label} {' '.join(t.topics)}" for t in TEMPLATES.values()]
    labels += [spec.label for schema in SCHEMAS.values() for spec in schema]
    return " ".join(labels)
