"""Names and titles from files, cleaned of terminal escapes, control and bidi characters."""

from __future__ import annotations

import pytest

from app.display import display_name, display_name_or_none, terminal_text, typed_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("lease.pdf", "lease.pdf"),
        ("\x1b[31mred\x1b[0m.pdf", "red.pdf"),  # colours (CSI)
        ("a\x1b]0;pwned\x07b.pdf", "ab.pdf"),  # a window title (OSC, BEL-terminated)
        ("a\x1b]8;;http://x\x1b\\b.pdf", "ab.pdf"),  # a hyperlink (OSC, ST-terminated)
        ("\x9b2Jwiped.pdf", "wiped.pdf"),  # one-byte CSI
        ("invoice\u202efdp.exe", "invoice fdp.exe"),  # a right-to-left override
        ("a\u2066b\u2069c\u200f", "a b c"),  # isolates and a mark
        ("two\nlines\r\tand\x00nul", "two lines and nul"),
        ("עברית.pdf", "עברית.pdf"),  # right-to-left letters themselves stay
    ],
)
def test_display_name(raw: str, shown: str) -> None:
    assert display_name(raw) == shown


def test_display_name_or_none() -> None:
    assert display_name_or_none(None) is None
    assert display_name_or_none("\x1b[2J\u202e") is None
    assert display_name_or_none(" Master Services Agreement ") == "Master Services Agreement"


def test_terminal_text_keeps_lines_and_right_to_left_marks() -> None:
    text = "First line\x1b[2J\nשלום\u200f world\tTab\r\nEnd\x07"
    assert terminal_text(text) == "First line\nשלום\u200f world\tTab\nEnd"


def test_typed_text_reads_as_a_person_sees_it() -> None:
    assert typed_text("Cafe\u0301  matters ") == "Café matters"  # NFKC composes the accent
    assert typed_text("\uff37hich law?") == "Which law?"  # full-width letters
    assert typed_text("gov\u00aderning\u200b law\u2060") == "governing law"  # soft hyphen, ZW
    assert typed_text("\u200b\u200c\u200d\u2060\ufeff") == ""  # nothing visible was typed
    assert typed_text("line\none\ttwo\x07") == "line one two"
    assert typed_text("\u202eevil") == "evil"  # a bidi override is invisible too
