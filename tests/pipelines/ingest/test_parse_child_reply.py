"""The parse child's reply to an error it did not expect: refused as damaged, with the error's
type and where in our code it came from for the worker's log, never its message (which may
quote the document)."""

from __future__ import annotations

import json

from pipelines.errors import DamagedPdfError
from pipelines.ingest.limits import DAMAGED
from pipelines.ingest.parse_child import _error_reply, _unexpected_reply

SECRET = "Patient Jane Roe, MRN 1234567"


def _fails_with_the_document_s_words() -> None:
    raise KeyError(SECRET)


def test_an_unexpected_error_is_refused_as_damaged_with_its_place_not_its_words() -> None:
    damaged = _error_reply(DamagedPdfError(DAMAGED))
    try:
        _fails_with_the_document_s_words()
    except KeyError as error:
        reply = json.loads(_unexpected_reply(damaged, error))
    assert {k: v for k, v in reply.items() if k != "cause"} == json.loads(damaged)
    assert reply["cause"].startswith("builtins.KeyError at test_parse_child_reply.py:")
    assert reply["cause"].endswith(" in _fails_with_the_document_s_words")
    assert SECRET not in json.dumps(reply)
