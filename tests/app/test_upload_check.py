"""The quick look at an upload before it is queued: size, PDF header, password."""

from __future__ import annotations

from app.services.upload_check import check_upload
from tests.pipelines import pdf_factory


def test_upload_check(tmp_path) -> None:
    plain = pdf_factory.text_pdf(tmp_path, ["Hello."], name="plain.pdf")
    data = plain.read_bytes()
    assert check_upload(data, password=None, max_bytes=10**7).is_ok
    assert check_upload(data, password=None, max_bytes=10).error_code == "too_large"
    assert check_upload(b"", password=None, max_bytes=10).error_code == "not_a_pdf"
    assert check_upload(b"junk" * 10, password=None, max_bytes=100).error_code == "not_a_pdf"
    # A user password of "" opens the file: no password needed, but it is encrypted.
    open_lock = pdf_factory.encrypted_pdf(plain, user_password="", owner_password="o", name="e.pdf")
    result = check_upload(open_lock.read_bytes(), password=None, max_bytes=10**7)
    assert (result.is_ok, result.is_encrypted) == (True, True)
    locked = pdf_factory.encrypted_pdf(plain, user_password="pw", owner_password="o", name="l.pdf")
    assert check_upload(locked.read_bytes(), password=None, max_bytes=10**7).error_code == (
        "password_required"
    )
    assert check_upload(locked.read_bytes(), password="no", max_bytes=10**7).error_code == (
        "wrong_password"
    )
    assert check_upload(locked.read_bytes(), password="pw", max_bytes=10**7).is_ok
