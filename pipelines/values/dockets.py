"""Docket numbers as courts write them: "No. 20-1507", "Nos. 11-889 and 11-890", "Case No.
1:19-cv-01234", "No. CIV-07-0045-HE", "No. 363A14-4". One pattern for the key-facts readers
and the support check, so a number one of them reads is a number the other reads too.
"""

from __future__ import annotations

import re

# The dashes a number is written with (and a PDF's line break beside one: "CIV–07–  0045").
_DASH = r"\s{0,2}[-–‑:]\s{0,2}"
_LABEL = r"\b(?P<label>(?:Case|Docket|Appeal|Civil\s+Action|Criminal\s+Action)\s+)?Nos?\.\s*"
# A number in pieces ("20-1507"): what a caption's reader takes for a docket.
DOCKET = re.compile(rf"{_LABEL}(?P<number>(?=[\w.–‑:-]*\d)[A-Z0-9][\w.]*(?:{_DASH}[\w.]*\w)+)")
# Also one piece ("No. 4471"): an answer may write it so.
DOCKET_OR_ONE_PIECE = re.compile(
    rf"{_LABEL}(?P<number>(?=[\w.–‑:-]*\d)[A-Z0-9][\w.]*(?:{_DASH}[\w.]*\w)*)"
)


def docket_key(number: str) -> str:
    """A number as one writing of it: "CIV–07– 0045–HE" and "CIV-07-0045-HE" are one."""
    return re.sub(r"\s*[-–‑]\s*", "-", number).rstrip(".")
