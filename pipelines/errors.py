"""Typed errors of the pipelines. Each carries a sentence a person understands; the edges show it."""

from __future__ import annotations


class DocumentError(Exception):
    """A document LongDoc cannot take in. `code` is stable (stored on jobs); `message` is for people."""

    code = "document_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotAPdfError(DocumentError):
    code = "not_a_pdf"


class PasswordRequiredError(DocumentError):
    code = "password_required"


class WrongPasswordError(DocumentError):
    code = "wrong_password"


class NoTextLayerError(DocumentError):
    code = "no_text_layer"


class DamagedPdfError(DocumentError):
    code = "damaged_pdf"


class TooLargeError(DocumentError):
    code = "too_large"


class TooManyPagesError(DocumentError):
    code = "too_many_pages"


class TooMuchTextError(DocumentError):
    """A page or the whole document gives more text than the caps (pipelines/ingest/text_caps.py)."""

    code = "too_much_text"


class TooComplexError(DocumentError):
    """pypdf stopped at one of its own safety limits (a stream that inflates past 75 MB, a loop
    in the page tree, an array of more than 100,000 items)."""

    code = "too_complex"


class ParseTimeoutError(DocumentError):
    code = "parse_timeout"


class ParseMemoryError(DocumentError):
    code = "parse_out_of_memory"


class ContextTooSmallError(DocumentError):
    """The model's context window cannot hold even the smallest prompt the pipeline must send."""

    code = "context_too_small"


class OcrUnavailableError(DocumentError):
    """The OCR package or its models are not installed: scanned pages cannot be read."""

    code = "ocr_unavailable"


class OcrModelDownloadError(DocumentError):
    """The OCR package tried to fetch a model from the internet; LongDoc never lets it."""

    code = "ocr_model_download"
