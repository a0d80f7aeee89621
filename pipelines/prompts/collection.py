"""The prompt of a question across a collection: the chosen passages, document by document
under page markers naming each document, then the quotes, then the question.

Kept apart from answer.py so that pipelines.prompts.texts can render it without a document
(every prompt the pipelines send is checked against the model's output: pipelines.prompts.echo).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pipelines.prompts.templates import TASK_SEPARATOR
from pipelines.retrieval.evidence import Evidence


class SourceQuote(Protocol):
    """A quoted sentence and the label of its document (pipelines.collection.sources has them)."""

    @property
    def label(self) -> str: ...

    @property
    def evidence(self) -> Evidence: ...


def cite(label: str, page: int) -> str:
    """A page of a document in a collection, as the prompt marks it and the model cites it."""
    return f"[{label}, p. {page}]"


SYSTEM_PROMPT = (
    "You are LongDoc, a careful assistant for legal and medical documents. "
    "Use only facts stated in the documents you are given. "
    "Each page of text starts with a marker naming its document and page, such as "
    "[Master Services Agreement, p. 14]; cite the pages you use in that form."
)
QUOTES_HEADER = "Sentences quoted from the documents that bear on the question:"
NO_QUOTES = "(No sentence of the documents shares a word with it.)"
INSTRUCTIONS = (
    "Answer the question below in a few sentences, using only these quotes and the documents "
    "above, and cite every document and page you used in the same form as the quotes."
)
NOT_STATED = "If they do not say, answer that the documents do not say."


def quote_lines(quotes: Sequence[SourceQuote]) -> str:
    return "\n".join(
        f'{cite(q.label, q.evidence.page)} "{" ".join(q.evidence.text.split())}"' for q in quotes
    )


def answer_messages(
    body: str, quotes: Sequence[SourceQuote], question: str
) -> list[dict[str, str]]:
    """The documents' passages (`body`), the quotes, the question last."""
    listed = quote_lines(quotes) or NO_QUOTES
    task = f"{QUOTES_HEADER}\n{listed}\n\n{INSTRUCTIONS} {NOT_STATED}\nQuestion: {question.strip()}"
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": body + TASK_SEPARATOR + task},
    ]
