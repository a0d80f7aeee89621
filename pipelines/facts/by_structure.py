"""The key facts a document's structure gives, per sub-kind: a label's sections
(label_sections), an opinion's caption and conclusion (caption, conclusion), a contract's term
and renewal clauses (contract_terms). extract.py takes these first; retrieval and the model
read only the fields they leave empty."""

from __future__ import annotations

from pipelines.facts.caption import read_caption
from pipelines.facts.conclusion import read_disposition
from pipelines.facts.contract_terms import read_renewal, read_term
from pipelines.facts.label_sections import read_label
from pipelines.facts.structured import Found
from pipelines.kinds import CONTRACT, LABEL, OPINION
from pipelines.retrieval.evidence import DocumentSentences


def read_structure(subkind: str, sentences: DocumentSentences) -> dict[str, Found]:
    """Field name -> the value its place in the document gives (none for other sub-kinds)."""
    if subkind == LABEL:
        return read_label(sentences)
    if subkind == OPINION:
        found = read_caption(sentences)
        disposition = read_disposition(sentences)
        if disposition is not None:
            found["disposition"] = disposition
        return found
    if subkind == CONTRACT:
        found = {}
        term, renewal = read_term(sentences), read_renewal(sentences)
        if term is not None:
            found["expiration_date"] = term
        if renewal is not None:
            found["renewal_term"] = renewal
        return found
    return {}
