"""Table rows as JSON (pipelines.collection.table_reply), as a model server's structured output
writes them: read into the same rows as plain text, the model's quote shown only where the
document holds it verbatim, and on the page the document puts it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pipelines.collection.table import MODEL, QUOTE, answer_each
from pipelines.collection.table_reply import ROW_SCHEMA, RowReply, row_from_reply
from tests.pipelines.collection.test_answer import ASSIGNMENT, BatchingEcho, _sources

QUESTION = "Which of these contracts may assign, in plain words?"


@dataclass
class JsonRows(BatchingEcho):
    """The echo model following the row schema when asked for it: its answer, `page` and
    `quote` as JSON."""

    quote: str = ""
    page: int = 9
    _schema: dict | None = None

    def complete_many(self, conversations, *, max_new_tokens, response_schema=None, **kwargs):
        self._schema = response_schema
        return super().complete_many(
            conversations, max_new_tokens=max_new_tokens, response_schema=response_schema
        )

    def _answer(self, content: str) -> str:
        answer = super()._answer(content)
        if self._schema is None:
            return answer
        return json.dumps({"answer": answer, "page": self.page, "quote": self.quote})


def test_the_table_asks_for_the_row_schema_and_reads_json_rows() -> None:
    sources = _sources()
    plain = answer_each(QUESTION, list(sources.values()), BatchingEcho())
    model = JsonRows(quote=ASSIGNMENT.split(" without")[0], page=9)

    result = answer_each(QUESTION, list(sources.values()), model)

    assert model.schemas == [ROW_SCHEMA]
    rows = {row.document_id: row for row in result.rows}
    assert result.stats["num_json_replies"] == result.stats["num_asked"] == 3
    # The supply agreement holds the quote: its sentence is shown, on the page the document
    # puts it on (2), not the model's (9); the answer is the model's, checked.
    assert (rows[2].source, rows[2].quote, rows[2].page) == (MODEL, ASSIGNMENT, 2)
    assert rows[2].answer == next(r.answer for r in plain.rows if r.document_id == 2)
    # The lease and the employment contract do not hold it: a made-up quote there, never
    # shown; their answers fall back to their own best quote.
    assert result.stats["num_quotes_not_in_document"] == 2
    for document_id in (1, 3):
        assert rows[document_id].source == QUOTE
        assert "assign" not in rows[document_id].quote + rows[document_id].answer
        assert rows[document_id].quote in sources[document_id].sentences.text.replace("\n", " ")


def test_a_row_without_a_quote_is_judged_on_the_retrieved_quotes() -> None:
    sources = _sources()
    plain = answer_each(QUESTION, list(sources.values()), BatchingEcho())

    result = answer_each(QUESTION, list(sources.values()), JsonRows(quote=""))

    assert result.stats["num_json_replies"] == 3
    assert result.stats["num_quotes_not_in_document"] == 0
    assert [(r.answer, r.quote, r.page, r.source) for r in result.rows] == [
        (r.answer, r.quote, r.page, r.source) for r in plain.rows
    ]


def test_json_replies_read_whole_or_cut_and_anything_else_is_plain_text() -> None:
    whole = '{"answer": "Yes, with consent.", "page": 2, "quote": "may not assign"}'
    assert row_from_reply(whole) == RowReply("Yes, with consent.", 2, "may not assign")
    # Cut by the token limit inside the quote: the answer and page stand, the quote's start
    # finds its sentence; a start of fewer than four words is dropped.
    cut = '{"answer": "Yes, with \\"consent\\".", "page": 2, "quote": "The Supplier may not assi'
    assert row_from_reply(cut) == RowReply(
        'Yes, with "consent".', 2, "The Supplier may not assi", is_cut=True
    )
    assert row_from_reply('{"answer": "Yes.", "page": 2, "quote": "The Sup').quote == ""
    assert row_from_reply('{"answer": "Yes, with cons') is None
    assert row_from_reply("Yes, with consent [Supply Agreement, p. 2].") is None
    assert row_from_reply('{"answer": "Yes."}') is None  # another shape: read as text
    assert row_from_reply('{"answer": "Yes.", "page": true, "quote": ""}') is None
