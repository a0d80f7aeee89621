"""What a court orders, however it is written: "we affirm", "AFFIRMED", "the judgment is
reversed and the case remanded", "upheld", "set aside", each by its written past form. One
vocabulary for the conclusion reader, the facts' clause reader and the support check.
"""

from __future__ import annotations

import re

# Stem as matched (lower case, spaces collapsed) -> the outcome's written past form.
DISPOSITIONS = {
    "affirm": "affirmed",
    "uph": "affirmed",  # "upheld"
    "revers": "reversed",
    "overturn": "reversed",
    "remand": "remanded",
    "vacat": "vacated",
    "dismiss": "dismissed",
    "modif": "modified",
    "den": "denied",
    "grant": "granted",
    "set aside": "set aside",
}
_STEMS = r"affirm|uph(?=eld)|revers|overturn|remand|vacat|dismiss|modif|den|grant|set\s+aside"
_ENDINGS = r"(?:s|ed|e|ing|ied|y|ies|al|eld|ance)?"
# Group 1: the stem; `part`: "in part" after it ("affirmed in part").
DISPOSITION = re.compile(
    rf"\b({_STEMS}){_ENDINGS}\b(?P<part>\s+in\s+part)?",
    re.IGNORECASE,
)


def disposition_of(match: re.Match[str]) -> str:
    """The written past form of a DISPOSITION match, without "in part"."""
    return DISPOSITIONS[" ".join(match.group(1).lower().split())]
