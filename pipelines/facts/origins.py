"""Where a key fact read by retrieval and the model stands, in words for a person ("preamble,
p. 1", "clause 12.1, p. 9", "opening pages, p. 2"), and a contract's parties with the roles
their preamble defines ("Alder Holdings LLC (Landlord); Birch Realty Corp. (Tenant)")."""

from __future__ import annotations

from dataclasses import replace

from pipelines.facts.contract_terms import clause_origin, party_roles
from pipelines.facts.fact import Fact
from pipelines.facts.schema import FieldSpec
from pipelines.facts.structured import origin_on_page
from pipelines.kinds import CONTRACT, OPINION
from pipelines.retrieval.evidence import DocumentSentences

_REGION_WORDS = {
    CONTRACT: {"opening": "preamble"},
    OPINION: {"opening": "opening pages", "closing": "closing pages"},
}


def retrieved_origin(
    subkind: str, spec: FieldSpec, fact: Fact, sentences: DocumentSentences
) -> str:
    """The origin of a fact read from retrieved passages: its region's name, or in a contract
    the clause number its quote stands under; "" for a fact without a value."""
    if not fact.is_found or not fact.evidence:
        return ""
    start = fact.evidence[0].start_char
    where = _REGION_WORDS.get(subkind, {}).get(spec.region)
    if where is not None:
        return origin_on_page(where, sentences, start)
    if subkind == CONTRACT:
        return clause_origin(sentences, start)
    return origin_on_page("passage retrieved for the field", sentences, start)


def with_roles(fact: Fact, sentences: DocumentSentences) -> Fact:
    """A contract's parties fact with each party's role after its name, where the preamble
    defines one; the value and its normalised form are both "Name (Role); Name"."""
    names = fact.value.split("; ")
    roles = party_roles(sentences.text, names)
    if not roles:
        return fact
    value = "; ".join(f"{name} ({roles[name]})" if name in roles else name for name in names)
    return replace(fact, value=value, normalized=value)
