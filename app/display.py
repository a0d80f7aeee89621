"""Text from outside (file names, PDF titles, model output) made safe to print or show.

A file name or a PDF title is chosen by whoever made the file. Printed raw, an ANSI or OSC
escape sequence in it can recolour, move the cursor, retitle or rewrite a terminal; a bidi
override (U+202E) shows "invoice‮fdp.exe" as "invoiceexe.pdf". So every name and title is
cleaned before it is stored for display and again whenever it is printed (rows stored before
this cleaning existed): `display_name`. Long text printed raw to a terminal (page text, a
summary, an answer) keeps its line breaks and its right-to-left marks, which Hebrew and Arabic
need, but loses escape sequences and control characters: `terminal_text`.
"""

from __future__ import annotations

import re
import unicodedata

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-character escapes, and their
# one-byte C1 forms (0x9B CSI, 0x9D OSC).
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*(?:\x07|\x9c)?"
)
# Embeddings, overrides, isolates and marks that reorder what follows them.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_NAME_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}]")
_TEXT_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def display_name(text: str) -> str:
    """A one-line name or title without escape sequences, control or bidi characters."""
    text = _NAME_UNSAFE.sub(" ", _ESCAPE_SEQUENCE.sub("", text))
    return " ".join(text.split())


def display_name_or_none(text: str | None) -> str | None:
    """`display_name`, keeping None, and None for a name that was nothing but control codes."""
    if text is None:
        return None
    return display_name(text) or None


def terminal_text(text: str) -> str:
    """Text to print raw: line breaks and tabs kept, escape sequences and controls removed."""
    return _TEXT_UNSAFE.sub("", _ESCAPE_SEQUENCE.sub("", text.replace("\r\n", "\n")))


def typed_text(text: str) -> str:
    """Text a person typed (a question, a query, a name) as it reads: NFKC-normalized, so that a
    composed and a decomposed "é" (or a full-width letter) are the same text, without the
    invisible format characters (zero-width spaces and joiners, word joiners, soft hyphens, byte
    order marks, bidi controls) and control characters, spaces collapsed. Empty when nothing
    visible was typed: Python's str.strip() keeps U+200B, so a question of zero-width spaces
    would otherwise pass an emptiness check."""
    text = unicodedata.normalize("NFKC", _ESCAPE_SEQUENCE.sub("", text))
    visible = "".join(
        " " if char.isspace() else char
        for char in text
        if char.isspace() or unicodedata.category(char) not in _INVISIBLE_CATEGORIES
    )
    return " ".join(visible.split())


# Format (Cf: zero-width, bidi, soft hyphen), control (Cc), surrogate and unassigned code points.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Cs", "Cn", "Co"})
