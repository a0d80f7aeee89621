"""Names of jurisdictions (US states and territories, countries, Canadian provinces, Australian
states, the nations of the UK) and their common other names, for checking an answer's places.

`find_jurisdictions` finds them in text, longest name first ("New South Wales" before "Wales",
"West Virginia" before "Virginia"), and gives each a canonical key, so "U.S." in an answer and
"United States of America" in a contract are the same place.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

US_STATES = (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
    "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas",
    "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota",
    "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey",
    "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon",
    "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah",
    "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming",
    "District of Columbia", "Puerto Rico", "Guam", "U.S. Virgin Islands", "American Samoa",
)  # fmt: skip

CANADIAN_PROVINCES = (
    "Alberta", "British Columbia", "Manitoba", "New Brunswick", "Newfoundland and Labrador",
    "Nova Scotia", "Ontario", "Prince Edward Island", "Quebec", "Saskatchewan", "Yukon",
    "Northwest Territories", "Nunavut",
)  # fmt: skip

AUSTRALIAN_STATES = (
    "New South Wales", "Queensland", "South Australia", "Tasmania", "Victoria",
    "Western Australia", "Australian Capital Territory", "Northern Territory",
)  # fmt: skip

UK_NATIONS = ("England", "Wales", "Scotland", "Northern Ireland", "England and Wales")

COUNTRIES = (
    "Afghanistan", "Albania", "Algeria", "Andorra", "Angola", "Argentina", "Armenia",
    "Australia", "Austria", "Azerbaijan", "Bahamas", "Bahrain", "Bangladesh", "Barbados",
    "Belarus", "Belgium", "Belize", "Benin", "Bermuda", "Bhutan", "Bolivia",
    "Bosnia and Herzegovina", "Botswana", "Brazil", "British Virgin Islands", "Brunei",
    "Bulgaria", "Burkina Faso", "Burundi", "Cambodia", "Cameroon", "Canada", "Cape Verde",
    "Cayman Islands", "Central African Republic", "Chile", "China", "Colombia", "Costa Rica",
    "Croatia", "Cuba", "Curacao", "Cyprus", "Czech Republic", "Denmark", "Djibouti", "Dominica",
    "Dominican Republic", "Ecuador", "Egypt", "El Salvador", "Estonia", "Eswatini", "Ethiopia",
    "Fiji", "Finland", "France", "Gabon", "Gambia", "Germany", "Ghana", "Gibraltar", "Greece",
    "Grenada", "Guatemala", "Guernsey", "Guyana", "Haiti", "Honduras", "Hong Kong", "Hungary",
    "Iceland", "India", "Indonesia", "Iran", "Iraq", "Ireland", "Isle of Man", "Israel", "Italy",
    "Jamaica", "Japan", "Jordan", "Kazakhstan", "Kenya", "Korea", "Kosovo", "Kuwait", "Latvia",
    "Lebanon", "Liberia", "Libya", "Liechtenstein", "Lithuania", "Luxembourg", "Macau",
    "Madagascar", "Malawi", "Malaysia", "Maldives", "Mali", "Malta", "Marshall Islands",
    "Mauritius", "Mexico", "Moldova", "Monaco", "Mongolia", "Montenegro", "Morocco",
    "Mozambique", "Myanmar", "Namibia", "Nepal", "Netherlands", "New Zealand", "Nicaragua",
    "Niger", "Nigeria", "North Macedonia", "Norway", "Oman", "Pakistan", "Panama",
    "Papua New Guinea", "Paraguay", "Peru", "Philippines", "Poland", "Portugal", "Qatar",
    "Romania", "Russia", "Rwanda", "Saudi Arabia", "Senegal", "Serbia", "Seychelles",
    "Sierra Leone", "Singapore", "Slovakia", "Slovenia", "South Africa", "South Korea", "Spain",
    "Sri Lanka", "Sudan", "Suriname", "Sweden", "Switzerland", "Syria", "Taiwan", "Tanzania",
    "Thailand", "Togo", "Trinidad and Tobago", "Tunisia", "Turkey", "Uganda", "Ukraine",
    "United Arab Emirates", "United Kingdom", "United States", "Uruguay", "Uzbekistan",
    "Vanuatu", "Venezuela", "Vietnam", "Yemen", "Zambia", "Zimbabwe",
)  # fmt: skip

# Other names of one place -> its canonical name above.
ALIASES = {
    "United States of America": "United States",
    "U.S.A.": "United States",
    "USA": "United States",
    "U.S.": "United States",
    "US": "United States",
    "America": "United States",
    "U.K.": "United Kingdom",
    "UK": "United Kingdom",
    "Great Britain": "United Kingdom",
    "Britain": "United Kingdom",
    "People's Republic of China": "China",
    "PRC": "China",
    "Republic of Korea": "South Korea",
    "Russian Federation": "Russia",
    "The Netherlands": "Netherlands",
    "Holland": "Netherlands",
    "Czechia": "Czech Republic",
    "Türkiye": "Turkey",
    "UAE": "United Arab Emirates",
    "Washington, D.C.": "District of Columbia",
    "Washington D.C.": "District of Columbia",
    "D.C.": "District of Columbia",
    "Québec": "Quebec",
    "Republic of Ireland": "Ireland",
    "Hong Kong SAR": "Hong Kong",
}

_NAMES = (*US_STATES, *CANADIAN_PROVINCES, *AUSTRALIAN_STATES, *UK_NATIONS, *COUNTRIES)
# Short upper-case aliases match only as written ("US", not "us"); everything else ignores case.
_CASE_SENSITIVE = frozenset({"US", "UK", "USA", "PRC", "UAE"})


@dataclass(frozen=True)
class JurisdictionMention:
    key: str  # the canonical name, e.g. "United States"
    start: int
    end: int


def canonical(name: str) -> str | None:
    """The canonical name of a jurisdiction ("u.s.a." -> "United States"), None if unknown."""
    return _lookup().get(_fold(name))


def find_jurisdictions(text: str, *, proper_nouns_only: bool = False) -> list[JurisdictionMention]:
    """Jurisdictions named in `text`, in order, none overlapping (the longest name wins).

    `proper_nouns_only`: only mentions whose words start with a capital letter, as an answer
    names a place ("Georgia law"), so a common word that is also a country is not taken.
    """
    mentions = []
    for match in _pattern().finditer(text):
        written = match.group(0)
        # "US" and "UK" are names only in capitals ("us" is a pronoun).
        if written.upper() in _CASE_SENSITIVE and written.upper() != written:
            continue
        if proper_nouns_only and not _capitalised(written):
            continue
        key = _lookup().get(_fold(written))
        if key is not None:
            mentions.append(JurisdictionMention(key, match.start(), match.end()))
    return mentions


def _capitalised(written: str) -> bool:
    small = {"of", "and", "the"}
    words = [w for w in re.split(r"[\s,]+", written) if w]
    return all(w[0].isupper() for w in words if w.lower() not in small)


def _fold(name: str) -> str:
    return " ".join(name.replace("’", "'").split()).casefold()


@functools.cache
def _lookup() -> dict[str, str]:
    table = {_fold(name): name for name in _NAMES}
    table.update({_fold(alias): name for alias, name in ALIASES.items()})
    return table


@functools.cache
def _pattern() -> re.Pattern[str]:
    names = sorted({*_NAMES, *ALIASES}, key=len, reverse=True)
    # Spaces in a name match any run of whitespace (PDF text wraps lines inside names).
    alternatives = "|".join(re.escape(name).replace(r"\ ", r"\s+") for name in names)
    # Not inside a longer word; a trailing "." of an abbreviation is part of the name.
    return re.compile(rf"(?<![\w.])(?:{alternatives})(?![\w])", re.IGNORECASE)
