"""A quick look at an uploaded file before it is queued: is it a PDF, does it need a password?

The worker parses every file again in a capped child process and has the last word; this only
spares the user a round trip for the common mistakes. It never reads page content: the header,
and for encrypted files pypdf's decryption check (the trailer and the /Encrypt dictionary).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

HEADER_WINDOW_BYTES = 1024  # as pipelines/ingest/parse.py: "%PDF-" may follow a little junk
MIB = 1024 * 1024


@dataclass(frozen=True)
class UploadCheck:
    is_ok: bool
    is_encrypted: bool = False
    error_code: str | None = None
    sentence: str | None = None


def check_upload(
    data: bytes, *, password: str | None, max_bytes: int, file_name: str = "This file"
) -> UploadCheck:
    if len(data) > max_bytes:
        return _refused(
            "too_large",
            f"{file_name} is {len(data) / MIB:.1f} MB; LongDoc takes PDFs up to "
            f"{max_bytes / MIB:.0f} MB (LONGDOC_MAX_UPLOAD_BYTES). Split it and upload the parts.",
        )
    if not data:
        return _refused("not_a_pdf", f"{file_name} is empty. Upload the PDF again.")
    if b"%PDF-" not in data[:HEADER_WINDOW_BYTES]:
        return _refused(
            "not_a_pdf",
            f"{file_name} is not a PDF. LongDoc reads PDF files only: save or export the "
            "document as a PDF and upload that.",
        )
    # The trailer's /Encrypt key is never inside a compressed stream, so its absence is final.
    if b"/Encrypt" not in data:
        return UploadCheck(is_ok=True)
    return _check_password(data, password, file_name)


def _check_password(data: bytes, password: str | None, file_name: str) -> UploadCheck:
    try:
        from pypdf import PasswordType, PdfReader

        reader = PdfReader(io.BytesIO(data), strict=False)
        if not reader.is_encrypted:
            return UploadCheck(is_ok=True)
        if reader.decrypt("") != PasswordType.NOT_DECRYPTED:
            return UploadCheck(is_ok=True, is_encrypted=True)  # an empty user password
        if not password:
            return _refused(
                "password_required",
                f"{file_name} is protected by a password. Enter it in the password field and "
                "upload the file again.",
                is_encrypted=True,
            )
        if reader.decrypt(password) == PasswordType.NOT_DECRYPTED:
            return _refused(
                "wrong_password",
                f"The password does not open {file_name}. Check it and try again.",
                is_encrypted=True,
            )
        return UploadCheck(is_ok=True, is_encrypted=True)
    except Exception:
        # Damaged or unusual: let the worker's parser decide and explain.
        return UploadCheck(is_ok=True, is_encrypted=True)


def _refused(code: str, sentence: str, *, is_encrypted: bool = False) -> UploadCheck:
    return UploadCheck(is_ok=False, is_encrypted=is_encrypted, error_code=code, sentence=sentence)
