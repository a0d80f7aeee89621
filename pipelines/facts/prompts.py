"""The model's prompt for one key fact: a fixed system message, the field's invented examples as
earlier turns, then the quotes and the question. Short on purpose: a few hundred tokens in,
a few words out, and the leading messages of a field are the same for every document, so the
engine's prefix cache serves them after the first.

Where the model can follow a JSON schema (a model server's structured output), the reply is
asked for as ANSWER_SCHEMA, {"answer": "..."}: the same words, without the wrapping a small
model adds ("Answer: ...", quotes, a second line). The messages do not change, so a model that
cannot follow a schema (our engine, a server that refuses it) answers them in plain text."""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.facts.schema import FieldSpec
from pipelines.retrieval.evidence import Evidence

SYSTEM_PROMPT = (
    "You read a quote from a document and answer a question about it with the exact words "
    "of the quote that answer it. Answer with those words only. "
    "If the quote does not say, answer: Not stated."
)


# The reply as JSON: the exact words of the quote that answer, or "Not stated".
ANSWER_SCHEMA: dict = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def _turn(quote: str, question: str) -> str:
    return f"Quote: {quote}\nQuestion: {question}"


def field_messages(spec: FieldSpec, quotes: Sequence[Evidence]) -> list[dict[str, str]]:
    """Chat messages asking the model for `spec`'s value in `quotes` (best first)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for example_quote, example_answer in spec.examples:
        messages.append({"role": "user", "content": _turn(example_quote, spec.question)})
        messages.append({"role": "assistant", "content": example_answer})
    quote = "\n".join(" ".join(evidence.text.split()) for evidence in quotes)
    messages.append({"role": "user", "content": _turn(quote, spec.question)})
    return messages
