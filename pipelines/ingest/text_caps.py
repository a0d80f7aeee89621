"""Caps on how much text a PDF may give, enforced while pypdf extracts it (in the parse child).

A few KB of PDF can draw one compressed content stream on every page, or show a letter half a
million times: the text that comes out bears no relation to the file's size. Every character
the child hands back must then be split, counted and stored by a process without a memory cap,
so the caps are decided here, inside the capped child, and a document past them is refused.

Refused, not truncated: a summary or an answer drawn from a cut document would cite a document
that is not the one the user gave, and no real page comes near the page cap (a dense page of
body text holds 1,500 to 3,500 characters; 100,000 needs a font of about 1.5 pt on A4).

Extraction is stopped early, as soon as either of two running counts passes its cap times a
margin: the characters pypdf hands out (RAW_MARGIN: cleaning removes some whitespace), and the
bytes of the strings the page's text operators show (SHOWN_BYTES_MARGIN: two bytes a character
in CID fonts). The second one matters because pypdf hands out the text of one line only when the
line ends: a bomb that shows 20 million characters on one line would otherwise be read whole (and
pypdf's time grows faster than linearly there). The exact caps then apply to the cleaned text,
which is what is stored (cleaning can lengthen text too: a ligature becomes two or three letters).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.errors import TooMuchTextError

# Raw text may exceed a cap by this factor before extraction is stopped...
RAW_MARGIN = 1.25
# ...and the bytes that text operators show, by this one.
SHOWN_BYTES_MARGIN = 4
_SHOW_OPERATORS = frozenset({b"Tj", b"TJ", b"'", b'"'})


class _CapReached(BaseException):
    """Raised from pypdf's text visitor. A BaseException, because pypdf catches Exception around
    form XObjects and would go on extracting after it."""


class TextBudget:
    """Counts the characters pypdf gives for each page and in all, and stops it past the caps."""

    def __init__(self, *, max_page_chars: int, max_document_chars: int) -> None:
        self.max_page_chars = max_page_chars
        self.max_document_chars = max_document_chars
        self.page_number = 0
        self._page_chars = 0
        self._document_chars = 0  # raw characters of the pages finished so far
        self._page_bytes = 0
        self._document_bytes = 0  # shown bytes of the pages finished so far

    def start_page(self, number: int) -> None:
        self._document_bytes += self._page_bytes
        self.page_number = number
        self._page_chars = 0
        self._page_bytes = 0

    def visit_operator(self, operator: Any, operands: Any, *_: Any) -> None:
        """pypdf's `visitor_operand_before`: counts the bytes each text operator shows."""
        if operator not in _SHOW_OPERATORS:
            return
        self._page_bytes += _shown_bytes(operands)
        if self._page_bytes > SHOWN_BYTES_MARGIN * self.max_page_chars or (
            self._document_bytes + self._page_bytes > SHOWN_BYTES_MARGIN * self.max_document_chars
        ):
            raise _CapReached

    def visit_text(self, text: Any, *_: Any) -> None:
        """pypdf's `visitor_text`: called with each piece of text as it is extracted."""
        self._page_chars += len(text) if isinstance(text, str) else 0
        if self._page_chars > RAW_MARGIN * self.max_page_chars or (
            self._document_chars + self._page_chars > RAW_MARGIN * self.max_document_chars
        ):
            raise _CapReached

    def end_page(self, text: str) -> None:
        """Account for the page's whole raw text (pypdf adds line breaks it does not visit)."""
        self._page_chars = len(text)
        self._document_chars += len(text)
        self.visit_text("")

    def refusal(self) -> TooMuchTextError:
        """The error for the cap that extraction went past."""
        if (
            self._page_chars > RAW_MARGIN * self.max_page_chars
            or self._page_bytes > SHOWN_BYTES_MARGIN * self.max_page_chars
        ):
            return page_refusal(self.page_number, self.max_page_chars)
        return document_refusal(self.max_document_chars)


def check_cleaned(texts: Sequence[str], *, max_page_chars: int, max_document_chars: int) -> None:
    """Raise TooMuchTextError when a cleaned page or the whole document is past its cap."""
    for number, text in enumerate(texts, start=1):
        if len(text) > max_page_chars:
            raise page_refusal(number, max_page_chars)
    if sum(map(len, texts)) > max_document_chars:
        raise document_refusal(max_document_chars)


def page_refusal(number: int, max_page_chars: int) -> TooMuchTextError:
    return TooMuchTextError(
        f"Page {number} of this PDF gives more than {max_page_chars:,} characters of text, far "
        "more than a printed page holds, so LongDoc stopped reading it and stored nothing. The "
        "file may be damaged or built to overload PDF readers; if it is a genuine document, "
        "print it to a new PDF and try again."
    )


def document_refusal(max_document_chars: int) -> TooMuchTextError:
    return TooMuchTextError(
        f"This PDF gives more than {max_document_chars:,} characters of text, more than LongDoc "
        "takes in one document, so it stopped reading and stored nothing. Split the PDF into "
        "smaller ones and try again."
    )


def _shown_bytes(operands: Any) -> int:
    """Bytes of the strings among a text operator's operands (TJ: inside its array)."""
    total = 0
    for operand in operands or ():
        items = operand if isinstance(operand, list) else (operand,)
        total += sum(len(item) for item in items if isinstance(item, (str, bytes)))
    return total


def is_cap_reached(error: BaseException) -> bool:
    return isinstance(error, _CapReached)
