"""A summary's first lines from the document's key facts: which court decided which case, when,
and how; which parties signed which agreement, when, under which law.

A small model asked to summarize an opinion often leaves out the court or the outcome, or names
them wrongly, and a summary without them is of little use to a lawyer. The key facts job has
already found them (retrieval for each field, the value read from the top evidence and checked:
a court's name from the opening, a disposition from the list, a parsed date; pipelines.facts.extract),
each with the sentences it rests on. So the summary leads with them: one line per identifying
fact, "Court: Supreme Court of the United States.", supported by construction, each with its
fact's quotes and page; the model's sentences follow, each checked on its own
(pipelines.summary.support).

Only facts that name or date the document lead (LEAD_VALUE_TYPES); clauses and long extracts
(a boxed warning, a population) stay on the Key facts tab, where they are read whole. A fact the
job searched for and did not find is left out: the lead states only what the document says.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.answer.from_facts import KnownFact
from pipelines.documents import Passage
from pipelines.facts.fields import all_fields
from pipelines.retrieval.evidence import DocumentSentences
from pipelines.retrieval.quotes import sentence_quote
from pipelines.summary.support import SUPPORTED, SentenceSupport

# The value types (pipelines.facts.schema.VALUE_TYPES) of the facts that lead a summary.
LEAD_VALUE_TYPES = frozenset(
    {"title", "court", "case_parties", "parties", "docket", "date", "jurisdiction", "disposition"}
)


def lead_sentences(
    facts: Sequence[KnownFact], sentences: DocumentSentences, passages: Sequence[Passage]
) -> list[SentenceSupport]:
    """One supported line per identifying fact with a value and quotes, in the facts' order
    (their schema's); a value that repeats an earlier one (an effective date that is the
    agreement date) is not said twice."""
    specs = all_fields()
    lead: list[SentenceSupport] = []
    said: set[str] = set()
    for fact in facts:
        spec = specs.get(fact.field)
        value = " ".join(fact.value.split()).rstrip(".;, ")
        if fact.missing or spec is None or spec.value_type not in LEAD_VALUE_TYPES or not value:
            continue
        quotes = [
            sentence_quote(sentences, passages, span, score=1.0)
            for span in fact.spans
            if 0 <= span[0] < span[1] <= len(sentences.text)
        ]
        if not quotes or value.casefold() in said:
            continue
        said.add(value.casefold())
        lead.append(SentenceSupport(f"{fact.label}: {value}.", SUPPORTED, quotes, term_share=1.0))
    return lead
