"""What a key fact is made of, per field: where to look, what to ask, and what a valid value is.

A schema is the tuple of fields of one sub-kind of document (pipelines.ingest.classify.guess_subkind):
contracts, court opinions, drug labels, guidelines, papers. The fields themselves live in
facts_fields_legal.py and facts_fields_medical.py; facts_fields.schema_for looks them up.

Every query, question and example is generic to its genre: the examples are invented
sentences (no party, date or place of any real document), shown to the model as earlier turns
of the chat so that it answers in the same short form.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a field's value is read and checked (pipelines/facts/values.py has one reader each).
VALUE_TYPES = (
    "title",  # a document's name, as written in its opening
    "parties",  # names that occur in the text, "; "-separated
    "case_parties",  # "A v. B", from an opinion's caption
    "date",  # a complete date, normalised to ISO 8601
    "term",  # how long it lasts: a date, a period, or "perpetual"
    "duration",  # a period of time, normalised to ISO 8601 ("P30D")
    "jurisdiction",  # a state, country or other jurisdiction from pipelines.values.jurisdictions
    "clause",  # "Yes" when a clause of this type is quoted
    "court",  # the court's name, from the opinion's opening
    "docket",  # a case number ("No. 20-1507")
    "disposition",  # affirmed, reversed, remanded, vacated, dismissed, ...
    "text",  # a short extract, every word of which is in the quote
    "judges",  # the panel or the author of an opinion, from its caption (structure only)
    "drug",  # a label's product name, from its highlights or Drug Facts (structure only)
)
# "opening": the document's first passages (a preamble, a caption); "closing": its last third
# (an opinion's disposition); "anywhere": the passages retrieval ranks best for the query.
REGIONS = ("opening", "closing", "anywhere")


@dataclass(frozen=True)
class FieldSpec:
    """One key fact to find. `cue` (a regular expression, case-insensitive) marks the words that
        must stand near a value for the value to be this field's (e.g. "effective" for an effective
        date); with `cue_required` a value without the cue nearby is refused, else the cue only
        decides between several candidates. Without `cue_after`, only a cue before the value counts
        ("dated as of" a date, not the "(the Commencement Date)" after another one). `pattern` is what the supporting quote must say (for a
        "clause", the clause itself); with `value_is_match` a "text" value is the pattern's match to
        the end of its line (a boxed warning's heading) rather than the sentence. A `structure_only`
    field is left empty where the document's structure does not give it."""

    name: str
    label: str
    value_type: str
    query: str
    question: str
    examples: tuple[tuple[str, str], ...]
    region: str = "anywhere"
    cue: str | None = None
    cue_required: bool = False
    cue_after: bool = True
    pattern: str | None = None
    value_is_match: bool = False
    max_new_tokens: int = 24
    # Read from the document's structure only (pipelines.facts.by_structure): retrieval and
    # the model cannot tell it apart (the court below's docket from the case's own).
    structure_only: bool = False

    def __post_init__(self) -> None:
        if self.value_type not in VALUE_TYPES:
            raise ValueError(f"unknown value type {self.value_type!r} for field {self.name!r}")
        if self.region not in REGIONS:
            raise ValueError(f"unknown region {self.region!r} for field {self.name!r}")
        if self.value_type == "clause" and not self.pattern:
            raise ValueError(f"clause field {self.name!r} needs a pattern")
