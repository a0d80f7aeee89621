"""The evidence-first question prompt: the document block, then the quoted sentences that bear
on the question, then the question.

The document block comes first and unchanged (pipelines.prompts.templates), so a second question about a
document that fits the context still reuses its cached prefix; the quotes belong to the task,
after it. Putting them next to the question is what helps a small model: it answers from the
few sentences it has just read rather than from pages thousands of tokens back.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.prompts.templates import SYSTEM_PROMPT, TASK_SEPARATOR
from pipelines.retrieval.evidence import Evidence

NO_QUOTES = "(No sentence of the document shares a word with the question.)"
QUOTES_HEADER = "Sentences quoted from the document that bear on the question:"
# No "use the document's own words" or the like: the default model copies such phrases into
# its answer ("The document's own words: ..."); pipelines.answer.check treats an answer made
# only of the task's and the question's words as no answer.
INSTRUCTIONS = (
    "Answer the question below in one or two sentences, using only these quotes and the "
    "document above, and cite the pages you used in the same form as the quotes."
)
NOT_STATED = "If they do not say, answer that the document does not say."


def quote_lines(quotes: Sequence[Evidence]) -> str:
    """One line per quote: "[p. 4] "This Agreement is governed by ..."", whitespace collapsed."""
    if not quotes:
        return NO_QUOTES
    return "\n".join(f'[p. {quote.page}] "{" ".join(quote.text.split())}"' for quote in quotes)


def task_words(question: str) -> str:
    """The words of the task around the quotes (and the system prompt's), with the question:
    an answer made of these alone says nothing the document does."""
    return " ".join((SYSTEM_PROMPT, QUOTES_HEADER, NO_QUOTES, INSTRUCTIONS, question))


def quoted_question_messages(
    block: str, quotes: Sequence[Evidence], question: str
) -> list[dict[str, str]]:
    """Answer one question from the quotes and the document above them; question last."""
    task = (
        f"{QUOTES_HEADER}\n{quote_lines(quotes)}\n\n{INSTRUCTIONS} {NOT_STATED}\n"
        f"Question: {question.strip()}"
    )
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": block + TASK_SEPARATOR + task},
    ]
