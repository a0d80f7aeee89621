"""The kinds of document and their sub-kinds: the one list of each in the pipelines.

A document's kind is stored with it, named at upload or guessed (pipelines/ingest/classify.py). Its
sub-kind, the genre inside the kind, is guessed from its words whenever it is needed: it picks
the key-fact schema (pipelines/facts/fields.py) and, for a legal document, the summary template
(pipelines/prompts/templates.py), so the two always agree. app/db/models/documents.py's
DocumentKind names the same kinds for the database (app and the pipelines import nothing of each
other); tests/worker/jobs/test_document_inputs.py keeps the two equal.
"""

from __future__ import annotations

LEGAL, MEDICAL, OTHER = "legal", "medical", "other"
KINDS = (LEGAL, MEDICAL, OTHER)

CONTRACT, OPINION = "contract", "opinion"
LABEL, GUIDELINE, PAPER = "label", "guideline", "paper"
# The sub-kinds of each kind, the most common upload first; every other document is OTHER.
SUBKINDS: dict[str, tuple[str, ...]] = {
    LEGAL: (CONTRACT, OPINION),
    MEDICAL: (LABEL, GUIDELINE, PAPER),
}
