"""Key-fact fields of contracts (CUAD's categories) and of court opinions.

Contract fields follow CUAD's names: document name, parties, agreement date, effective date,
expiration, renewal term, notice period to terminate renewal, governing law, and five clause
types (termination for convenience, anti-assignment, exclusivity, non-compete, cap on
liability) whose value is "Yes" with the quoted clause. Every example is invented.
"""

from __future__ import annotations

from pipelines.facts.schema import FieldSpec

_PREAMBLE = (
    'This Supply Agreement (the "Agreement") is made on 3 May 2001 between Northwind Traders '
    'Ltd., a Utah company ("Northwind"), and Contoso Foods, Inc., a Vermont corporation '
    '("Buyer").'
)
_LEASE = (
    "THIS LEASE, dated as of the 2nd day of March, 1999, is entered into by and between Alder "
    "Holdings LLC and Birch Realty Corp."
)

CONTRACT_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        name="document_name",
        label="Document name",
        value_type="title",
        region="opening",
        query="agreement contract lease license amendment title",
        question="What is the title of this document?",
        examples=(
            (
                "MASTER SERVICES AGREEMENT\nThis Master Services Agreement is made on",
                "MASTER SERVICES AGREEMENT",
            ),
        ),
        max_new_tokens=16,
    ),
    FieldSpec(
        name="parties",
        label="Parties",
        value_type="parties",
        region="opening",
        query="agreement between by and among party parties company corporation inc llc",
        question="Who are the parties to this agreement?",
        examples=(
            (_PREAMBLE, "Northwind Traders Ltd.; Contoso Foods, Inc."),
            (_LEASE, "Alder Holdings LLC; Birch Realty Corp."),
        ),
        max_new_tokens=40,
    ),
    FieldSpec(
        name="agreement_date",
        label="Agreement date",
        value_type="date",
        region="opening",
        query="agreement dated date made entered into as of day",
        question="On what date was this agreement made?",
        examples=((_PREAMBLE, "3 May 2001"), (_LEASE, "2nd day of March, 1999")),
        # "dated as of", "made and entered into as of", a "Date:" line; not "the Effective Date"
        # before some other date.
        cue=r"\b(?:dated|as\s+of|made|entered\s+into|executed)\b|(?im:^\s*date\b)",
        cue_after=False,
        max_new_tokens=16,
    ),
    FieldSpec(
        name="effective_date",
        label="Effective date",
        value_type="date",
        region="opening",
        query="effective date agreement shall be effective as of commence",
        question="On what date does this agreement take effect?",
        examples=(
            (
                'This Agreement is effective as of June 1, 2004 (the "Effective Date").',
                "June 1, 2004",
            ),
        ),
        # "effective as of" the date, or the date '(the "Effective Date")': not a mention of
        # the defined term near some other date.
        cue=(
            r"\beffective\s+(?:as\s+of|on|from)\b|\beffective\s+date\s+(?:is|shall\s+be|means)\b|"
            r"[“\"(]\s*(?:the\s+)?[“\"]?effective\s+date"
        ),
        cue_required=True,
        max_new_tokens=16,
    ),
    FieldSpec(
        name="expiration_date",
        label="Expiration",
        value_type="term",
        query="term of this agreement shall expire continue until terminate years initial term",
        question="When does this agreement expire?",
        examples=(
            (
                "The term of this Agreement shall commence on the Effective Date and shall "
                "expire on March 31, 2010.",
                "March 31, 2010",
            ),
            (
                "The initial term of this Agreement is two (2) years from the Effective Date.",
                "two (2) years",
            ),
        ),
        cue=r"\b(?:expir\w*|until|term|continue\w*|perpetu\w*|terminat\w*)\b",
        cue_required=True,
        # The agreement's own term: not a renewal, not a definition of another term.
        pattern=(
            r"(?s)^(?!.*\brenew)(?!.*[”\"]\s+(?:means|shall\s+mean)\b)"
            r"(?=.*\b(?:expir\w*|until|perpetu\w*|continue\w*\s+(?:in\s+(?:full\s+)?"
            r"(?:force|effect)|until|for)|remain\w*\s+in\s+(?:full\s+)?(?:force|effect)))"
            r"(?=.*\b(?:this\s+agreement|the\s+term|initial\s+term)\b)"
        ),
    ),
    FieldSpec(
        name="renewal_term",
        label="Renewal term",
        value_type="duration",
        query="renew automatically renewal term successive additional periods extend",
        question="For how long does this agreement renew?",
        examples=(
            (
                "Thereafter this Agreement renews automatically for successive one (1) year "
                "periods unless either party gives notice.",
                "one (1) year",
            ),
        ),
        cue=r"\b(?:renew\w*|successive|additional|extend\w*|extension)\b",
        cue_required=True,
        pattern=r"(?<![\w-])renew\w*|\bsuccessive\b|\bautomatic\w*",
        max_new_tokens=16,
    ),
    FieldSpec(
        name="notice_period",
        label="Notice to terminate renewal",
        value_type="duration",
        query="notice of non-renewal written notice prior to expiration renewal term days",
        question="How much notice must a party give to stop the agreement from renewing?",
        examples=(
            (
                "The term renews for one year unless a party gives written notice of "
                "non-renewal at least sixty (60) days before the end of the term.",
                "sixty (60) days",
            ),
        ),
        cue=r"\bnotice\b",
        cue_required=True,
        # Notice against the agreement's renewal, not a termination for breach or an insurer's.
        pattern=(
            r"(?s)^(?=.*\b(?:renew\w*|non-renewal|expir\w*|extend\w*|extension)\b)"
            r"(?=.*\b(?:agreement|term)\b)"
        ),
        max_new_tokens=16,
    ),
    FieldSpec(
        name="governing_law",
        label="Governing law",
        value_type="jurisdiction",
        query="governing law governed by construed in accordance with the laws of the state",
        question="Which state's or country's law governs this agreement?",
        examples=(
            (
                "This Lease is governed by the laws of the Province of Manitoba.",
                "Province of Manitoba",
            ),
            ("The parties agree that the laws of Sweden govern this contract.", "Sweden"),
        ),
        cue=r"\b(?:govern\w*|constru\w*|applicable\s+law)\b",
        cue_required=True,
        max_new_tokens=12,
    ),
    FieldSpec(
        name="termination_for_convenience",
        label="Termination for convenience",
        value_type="clause",
        query="terminate this agreement for convenience without cause at any time upon notice",
        question="Can a party end this agreement for convenience, without cause? Answer Yes or No.",
        examples=(
            (
                "Either party may terminate this Agreement without cause on ninety days notice.",
                "Yes",
            ),
        ),
        pattern=(
            r"terminat\w*\b[^.;]{0,200}?\b(?:for\s+(?:its\s+)?convenience|without\s+cause|"
            r"for\s+any\s+reason\s+or\s+no\s+reason|"
            r"at\s+any\s+time\s+(?:upon|by|on|with|for\s+any)\b)"
        ),
        max_new_tokens=4,
    ),
    FieldSpec(
        name="anti_assignment",
        label="Anti-assignment",
        value_type="clause",
        query="assign transfer this agreement rights obligations without prior written consent",
        question="Does assigning this agreement need the other party's consent? Answer Yes or No.",
        examples=(
            (
                "Neither party may assign this Agreement without the prior written consent of the other.",
                "Yes",
            ),
        ),
        pattern=r"assign\w*\b[^.;]{0,250}?\bconsent|consent\b[^.;]{0,120}?\bassign",
        max_new_tokens=4,
    ),
    FieldSpec(
        name="exclusivity",
        label="Exclusivity",
        value_type="clause",
        query="exclusive exclusively sole exclusive right license supplier distributor territory",
        question="Does this agreement grant exclusive rights? Answer Yes or No.",
        examples=(
            ("The Distributor is appointed the exclusive distributor in the Territory.", "Yes"),
        ),
        # An exclusive grant or appointment, not "exclusive remedy" or "exclusive of taxes".
        pattern=(
            r"(?<!non-)(?<!non)(?<!not )\bexclusive(?!\s+of\b)\s+(?:[\w-]+\s+){0,3}?(?:licen[cs]e|rights?|"
            r"distributor|supplier|provider|basis|agent|dealer|reseller|partner|relationship|"
            r"arrangement)\b|\bexclusively\s+(?:from|with|through)\b"
        ),
        max_new_tokens=4,
    ),
    FieldSpec(
        name="non_compete",
        label="Non-compete",
        value_type="clause",
        query="not compete competing business products non-competition covenant engage",
        question="Does this agreement forbid a party to compete? Answer Yes or No.",
        examples=(
            ("The Seller shall not compete with the Buyer in the Territory for two years.", "Yes"),
        ),
        pattern=(
            r"\bnon-?compet\w*|\b(?:not|never)\s+(?:to\s+)?(?:directly\s+or\s+indirectly\s+)?"
            r"(?:compete|engage\s+in\s+(?:any\s+)?(?:competing|competitive))"
        ),
        max_new_tokens=4,
    ),
    FieldSpec(
        name="cap_on_liability",
        label="Cap on liability",
        value_type="clause",
        query="liability shall not exceed aggregate total amount limitation of liability cap",
        question="Does this agreement cap a party's liability? Answer Yes or No.",
        examples=(
            ("In no event shall either party's total liability exceed the fees paid.", "Yes"),
        ),
        pattern=(
            r"liabilit\w*\b[^.;]{0,250}?\b(?:(?:shall|will|may|does)\s+not\s+exceed|"
            r"not\s+to\s+exceed|in\s+no\s+event\s+exceed|be\s+limited\s+to|"
            r"(?:maximum|aggregate)\s+(?:amount|liability))"
        ),
        max_new_tokens=4,
    ),
)

_CAPTION = (
    "SUPERIOR COURT OF THE STATE OF EXAMPLE\n\nNo. 04-1188\n\nMARIA LOPEZ,\nPlaintiff, "
    "Appellant,\nv.\nRIVERTON TRANSIT AUTHORITY,\nDefendant, Appellee.\nDecided May 2, 2011"
)

OPINION_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        name="court",
        label="Court",
        value_type="court",
        region="opening",
        query="court of appeals supreme court district court circuit state united states",
        question="Which court issued this opinion?",
        examples=((_CAPTION, "SUPERIOR COURT OF THE STATE OF EXAMPLE"),),
        max_new_tokens=16,
    ),
    FieldSpec(
        name="case_parties",
        label="Parties",
        value_type="case_parties",
        region="opening",
        query="plaintiff defendant appellant appellee petitioner respondent v",
        question="Who are the parties in this case?",
        examples=((_CAPTION, "MARIA LOPEZ v. RIVERTON TRANSIT AUTHORITY"),),
        max_new_tokens=32,
    ),
    FieldSpec(
        name="parties",
        label="Parties and roles",
        value_type="parties",
        region="opening",
        query="plaintiff defendant appellant appellee petitioner respondent v",
        question="Who are the parties and what are their roles?",
        examples=(),
        structure_only=True,  # "NAME (role); NAME (role)", from the caption
    ),
    FieldSpec(
        name="docket_number",
        label="Docket number",
        value_type="docket",
        region="opening",
        query="no docket case number",
        question="What is the docket number of this case?",
        examples=((_CAPTION, "No. 04-1188"),),
        max_new_tokens=12,
    ),
    FieldSpec(
        name="lower_docket_number",
        label="Docket number below",
        value_type="docket",
        region="opening",
        query="appeal from district court no docket case number below",
        question="What was the docket number in the court below?",
        examples=(),
        structure_only=True,
    ),
    FieldSpec(
        name="decision_date",
        label="Date",
        value_type="date",
        region="opening",
        query="decided filed dated argued submitted date opinion",
        question="On what date was this case decided?",
        examples=((_CAPTION, "May 2, 2011"),),
        cue=r"\b(?:decided|filed|dated|entered|issued|judgment)\b",
        max_new_tokens=16,
    ),
    FieldSpec(
        name="judges",
        label="Judges",
        value_type="judges",
        region="opening",
        query="before circuit judges justice delivered the opinion",
        question="Which judges decided this case?",
        examples=(),
        structure_only=True,
    ),
    FieldSpec(
        name="disposition",
        label="Disposition",
        value_type="disposition",
        region="closing",
        query="affirm reverse remand vacate dismiss judgment conclusion accordingly we",
        question="What did the court decide: affirmed, reversed, remanded, vacated or dismissed?",
        examples=(
            (
                "For these reasons, we reverse the judgment and remand for a new trial.",
                "reversed and remanded",
            ),
        ),
        max_new_tokens=8,
    ),
)
