"""Key-fact fields of drug labels, clinical guidelines and research papers (PICO).

Their values are short extracts: the model may shorten the quote, but every word it keeps must
be in the quote, else the best quoted sentence itself is the value. `pattern` is what the quote
must say for the field to be there at all (a boxed warning is written "WARNING", in capitals).
Every example is invented.
"""

from __future__ import annotations

from pipelines.facts.schema import FieldSpec

LABEL_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        name="drug_name",
        label="Drug",
        value_type="drug",
        region="opening",
        query="drug name tablets capsules for oral use active ingredient",
        question="Which drug is this label for?",
        examples=(),
        structure_only=True,  # the highlights' "needed to use X safely", Drug Facts' ingredient
    ),
    FieldSpec(
        name="boxed_warning",
        label="Boxed warning",
        value_type="text",
        region="opening",
        query="warning boxed warning risk death serious",
        question="What does the boxed warning say?",
        examples=(
            (
                "WARNING: SEVERE BLEEDING\nZorvatin can cause serious and fatal bleeding.",
                "Zorvatin can cause serious and fatal bleeding",
            ),
        ),
        # A boxed warning's heading, in capitals ("WARNING: LACTIC ACIDOSIS"), not the word in
        # running text or a "Warnings and Precautions" section.
        pattern=r"(?-i:\bWARNING:\s*[A-Z][A-Z0-9 ,;()/-]{2,})",
        value_is_match=True,
        max_new_tokens=40,
    ),
    FieldSpec(
        name="indications",
        label="Indications",
        value_type="text",
        query="indications and usage indicated for the treatment of uses",
        question="What is this drug indicated for?",
        examples=(
            (
                "INDICATIONS AND USAGE\nZorvatin is indicated for the treatment of mild "
                "seasonal rhinitis in adults.",
                "treatment of mild seasonal rhinitis in adults",
            ),
        ),
        pattern=r"\b(?:indicat\w*|uses?|relieves|treatment)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="dosage",
        label="Dosage and administration",
        value_type="text",
        query="dosage and administration recommended dose mg daily directions take tablets",
        question="What dose is recommended?",
        examples=(
            (
                "DOSAGE AND ADMINISTRATION\nThe recommended dose is 10 mg once daily with food.",
                "10 mg once daily with food",
            ),
        ),
        pattern=r"\b(?:dos\w*|mg|tablets?|capsules?|daily|directions|take)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="contraindications",
        label="Contraindications",
        value_type="text",
        query="contraindications contraindicated in patients with do not use hypersensitivity",
        question="In whom is this drug contraindicated?",
        examples=(
            (
                "CONTRAINDICATIONS\nZorvatin is contraindicated in patients with severe "
                "hepatic impairment.",
                "patients with severe hepatic impairment",
            ),
        ),
        pattern=r"\b(?:contraindicat\w*|do not use)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="warnings",
        label="Warnings and precautions",
        value_type="text",
        query="warnings and precautions risk of serious monitor discontinue",
        question="What are the main warnings?",
        examples=(
            (
                "WARNINGS AND PRECAUTIONS\nHepatotoxicity: Monitor liver tests before starting "
                "Zorvatin.",
                "Hepatotoxicity: Monitor liver tests before starting Zorvatin",
            ),
        ),
        pattern=r"\b(?:warn\w*|precaution\w*|risk|monitor\w*|discontinue)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="interactions",
        label="Drug interactions",
        value_type="text",
        query="drug interactions concomitant use coadministration inhibitors increase levels",
        question="Which drugs interact with this one?",
        examples=(
            (
                "DRUG INTERACTIONS\nStrong inhibitors of the liver enzyme raise Zorvatin levels.",
                "Strong inhibitors of the liver enzyme raise Zorvatin levels",
            ),
        ),
        pattern=r"\b(?:interact\w*|concomitant\w*|coadminist\w*|inhibitors?|inducers?)\b",
        max_new_tokens=40,
    ),
)

GUIDELINE_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        name="population",
        label="Population",
        value_type="text",
        query="this guideline covers people adults children aged with population",
        question="Whom does this guideline cover?",
        examples=(
            (
                "This guideline covers adults over 65 with long-term knee pain.",
                "adults over 65 with long-term knee pain",
            ),
        ),
        pattern=r"\b(?:cover\w*|people|adults|children|patients|aged|over)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="recommendations",
        label="Key recommendation",
        value_type="text",
        query="recommendation offer should be offered consider recommend",
        question="What does the guideline recommend?",
        examples=(
            (
                "Offer physiotherapy to adults with long-term knee pain.",
                "Offer physiotherapy to adults with long-term knee pain",
            ),
        ),
        pattern=r"\b(?:offer\w*|recommend\w*|consider|should)\b",
        max_new_tokens=40,
    ),
)

PAPER_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        name="population",
        label="Population",
        value_type="text",
        query="patients participants population enrolled included aged subjects studies",
        question="Who was studied?",
        examples=(
            (
                "We enrolled 240 adults aged 40 to 70 with type 2 diabetes.",
                "240 adults aged 40 to 70 with type 2 diabetes",
            ),
        ),
        pattern=r"\b(?:patients|participants|adults|children|subjects|people|enrolled|included|aged)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="intervention",
        label="Intervention",
        value_type="text",
        query="intervention treatment therapy received randomised randomized assigned to",
        question="What intervention was studied?",
        examples=(
            (
                "Participants were randomised to daily walking for twelve weeks or usual care.",
                "daily walking for twelve weeks",
            ),
        ),
        pattern=r"\b(?:interven\w*|treat\w*|therap\w*|receiv\w*|randomi[sz]\w*|assigned)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="comparison",
        label="Comparison",
        value_type="text",
        query="compared with control group placebo versus usual care comparison",
        question="What was the intervention compared with?",
        examples=(
            (
                "Participants were randomised to daily walking for twelve weeks or usual care.",
                "usual care",
            ),
        ),
        pattern=r"\b(?:compar\w*|control\w*|placebo|versus|vs|usual care)\b",
        max_new_tokens=40,
    ),
    FieldSpec(
        name="outcomes",
        label="Outcomes",
        value_type="text",
        query="primary outcome outcomes measured results showed significant improvement",
        question="What were the outcomes?",
        examples=(
            (
                "The primary outcome, HbA1c at twelve weeks, fell by 0.4 percentage points.",
                "HbA1c at twelve weeks fell by 0.4 percentage points",
            ),
        ),
        pattern=r"\b(?:outcomes?|results?|improv\w*|reduc\w*|increas\w*|significant\w*|associated)\b",
        max_new_tokens=40,
    ),
)
