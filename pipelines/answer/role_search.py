"""Where the document states what a question asks in its role, when retrieval missed it: the
parties, the court, the docket number and the date an agreement was made are in its opening
(a preamble, a caption), what the suit sought in an opinion's first pages (its syllabus or
first paragraph: "sued ..., seeking a declaratory judgment"), its outcome in its last pages. "Who are the parties to
this agreement?" shares no word with "by and between Acme Corp. and Beta LLC", so ranking by
the question's words rarely quotes the preamble; reading the opening for a sentence that
states the parties in that role does (pipelines.answer.assess.quote_settles).
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.answer import asked as k
from pipelines.answer.asked import asked_parts
from pipelines.answer.assess import first_settling
from pipelines.documents import Passage
from pipelines.retrieval.evidence import DocumentSentences, Evidence
from pipelines.retrieval.quotes import sentence_quote

# The kinds stated in a document's opening, and the one stated at its end.
OPENING_KINDS = frozenset({k.PARTY, k.COURT, k.DOCKET, k.DATE})
FIRST_PAGES_KINDS = frozenset({k.RELIEF})
CLOSING_KINDS = frozenset({k.OUTCOME})
# How many sentences of the opening (a caption is many short ones), of the first pages (a
# caption, then a syllabus or the opinion's first paragraphs) and of the end are read.
OPENING_SENTENCES = 60
FIRST_PAGES_SENTENCES = 200
CLOSING_SENTENCES = 40


def role_quotes(
    question: str,
    quotes: Sequence[Evidence],
    sentences: DocumentSentences,
    passages: Sequence[Passage],
) -> list[Evidence]:
    """Sentences (with the ones that continue them) of the opening or the end that state a part
    of `question` in its role, for each part that none of `quotes` settles; best part first."""
    found: list[Evidence] = []
    for part in asked_parts(question):
        if part.kind in OPENING_KINDS:
            spans = sentences.spans[:OPENING_SENTENCES]
        elif part.kind in FIRST_PAGES_KINDS:
            spans = sentences.spans[:FIRST_PAGES_SENTENCES]
        elif part.kind in CLOSING_KINDS:
            spans = sentences.spans[-CLOSING_SENTENCES:][::-1]
        else:
            continue
        if first_settling(part, quotes):
            continue
        read = [sentence_quote(sentences, passages, span) for span in spans]
        members = first_settling(part, read)
        found += [read[i] for i in sorted(members) if read[i] not in found]
    return found
