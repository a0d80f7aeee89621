"""Questions that ask something narrower than a field (pipelines.answer.specifics): a quote or a
stored fact of the right kind that does not say what the question names is no support; a
boxed warning is only the box; what a question sets aside is not asked. Invented labels and
cases, each rule beside an answer it lets through, so every rule can fail."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipelines.answer.assess import (
    PARTLY_SUPPORTED,
    SUPPORTED,
    UNSUPPORTED,
    answer_by_quotes,
    assess,
)
from pipelines.answer.from_facts import KnownFact, fact_answer, narrower_than
from pipelines.answer.question import answer_question
from pipelines.answer.specifics import covers, specifics
from pipelines.retrieval.evidence import DocumentSentences
from tests.pipelines.echo_model import EchoModel, make_document

LABEL = [
    (1, "WARNING: SEVERE HYPOGLYCEMIA. Zelnorat can cause hypoglycemia that may be fatal."),
    (2, "Adults: the recommended dose is 10 mg orally once daily with breakfast."),
    (3, "Patients with CrCl below 30 mL/min: 5 mg once every 48 hours."),
    (4, "Serious skin reactions have been reported [see Boxed Warning]."),
]
NO_BOX = [
    (1, "Zelnorat is indicated for the treatment of chronic plaque psoriasis in adults."),
    (4, "Hypersensitivity reactions [see Warnings and Precautions (5.1)]."),
]
CONTRACT = [
    (3, "Licensee shall manage trademark renewal filings and office actions for Licensor."),
    (5, "This Agreement shall renew automatically for successive one-year terms."),
]


@dataclass(frozen=True)
class Quote:
    text: str
    page: int


def _quotes(rows) -> list[Quote]:
    return [Quote(text, page) for page, text in rows]


def _assess(question: str, answer: str, rows):
    document = "\n".join(text for _, text in rows)
    return assess(question, answer, _quotes(rows), document=document)


def test_specifics_leave_out_question_words_and_the_genre_s_nouns() -> None:
    asked = specifics("How often should a patient whose GFR is below 10 mL/min take it?")
    assert asked == {"gfr", "lessthan", "10", "ml", "min"}  # "below", "less than", "<": one
    assert specifics("Who are the parties to this agreement?") == set()
    assert covers({"gfr", "ml", "dialysi"}, "CrCl below 30 mL/min") is False
    assert covers({"crcl", "ml"}, "CrCl below 30 mL/min") is True
    assert covers({"adult"}, "children") is True  # one specific: no requirement


def test_a_dose_for_another_population_does_not_settle_a_narrower_question() -> None:
    question = "How often should a patient whose CrCl is below 30 mL/min take it?"
    assert _assess(question, "5 mg once every 48 hours.", LABEL).status == SUPPORTED
    # The adult dose is a dose, in the dose's words, but not for these patients.
    assert _assess(question, "10 mg orally once daily.", LABEL).status != SUPPORTED
    by_quotes = answer_by_quotes(question, _quotes(LABEL))
    assert by_quotes is not None and LABEL[by_quotes.quotes[0]][0] == 3
    # A plain dose question is still settled by the adult dose.
    assert _assess("What is the dose?", "10 mg orally once daily.", LABEL).status == SUPPORTED


# A dosing table flattened to text: each grade's row runs into the next one's.
GRADED_TABLE = [
    (
        2,
        "Table 1. Dosing for Adults Infection Severity Usual Adult Dose Skin/Soft Tissue "
        "Mild/Moderate 400 mg every 12 hours or 200 mg every 8 hours Severe 800 mg every 12 "
        "hours or 400 mg every 8 hours Bone/Joint Moderate or Severe 800 mg every 12 hours",
    ),
]


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        ("What is the usual adult dose for a mild skin infection?", "200 mg every 8 hours.", True),
        ("What is the usual adult dose for a mild skin infection?", "400 mg every 8 hours.", False),
        ("What is the adult dose for a severe skin infection?", "800 mg every 12 hours.", True),
        # Half a dose: the table says how often, the answer does not.
        ("What is the usual adult dose for a mild skin infection?", "400 mg.", False),
        # "Moderate or Severe" is one row: both grades are its own.
        ("What is the adult dose for a moderate bone infection?", "800 mg every 12 hours.", True),
    ],
)
def test_a_dose_of_another_grade_s_row_does_not_settle_the_grade_asked(
    question, answer, expected
) -> None:
    assert (_assess(question, answer, GRADED_TABLE).status == SUPPORTED) is expected


@pytest.mark.parametrize(
    ("rows", "expected"),
    [(LABEL, SUPPORTED), (NO_BOX, None)],
)
def test_only_the_box_settles_a_boxed_warning_question(rows, expected) -> None:
    question = "What does the boxed warning on this label say?"
    by_quotes = answer_by_quotes(question, _quotes(rows))
    if expected is None:  # a cross-reference to Warnings and Precautions is not a box
        assert by_quotes is None
        assert _assess(question, "Hypersensitivity reactions.", rows).status != SUPPORTED
    else:
        assert by_quotes is not None and by_quotes.status == expected
        assert by_quotes.quotes == (0,)  # the heading, not "[see Boxed Warning]"


def test_what_a_question_sets_aside_is_not_asked() -> None:
    question = "Besides the boxed warning, what warnings does the label give?"
    verdict = _assess(question, "Serious skin reactions have been reported.", LABEL)
    assert verdict.status == SUPPORTED
    assert [part.part.kind for part in verdict.parts] == ["warning"]


def test_renewal_is_the_agreement_s_not_a_trademark_s() -> None:
    question = "Does this agreement renew automatically?"
    assert answer_by_quotes(question, _quotes(CONTRACT[:1])) is None
    by_quotes = answer_by_quotes(question, _quotes(CONTRACT))
    assert by_quotes is not None and by_quotes.quotes == (1,)


def test_the_lower_court_s_number_needs_the_lower_court() -> None:
    rows = [(1, "No. 11-889"), (2, "Appeal from the District Court, No. 4:10-cv-0045.")]
    question = "What was the case number in the district court?"
    by_quotes = answer_by_quotes(question, _quotes(rows))
    assert by_quotes is not None and by_quotes.quotes == (1,)
    assert answer_by_quotes(question, _quotes(rows[:1])) is None
    assert answer_by_quotes("What is the docket number?", _quotes(rows[:1])) is not None
    assert _assess(question, "No. 11-889.", rows[:1]).status in (PARTLY_SUPPORTED, UNSUPPORTED)


def _fact(field: str, label: str, value: str, quote: str = "") -> KnownFact:
    return KnownFact(field, label, value, spans=((0, 1),), quote=quote or value)


@pytest.mark.parametrize(
    ("question", "fact", "narrower"),
    [
        ("What is the dose?", _fact("dosage", "Dosage", "10 mg once daily"), False),
        ("What is the starting dose, and what is the maximum daily dose?",
         _fact("dosage", "Dosage", "Start at 10 mg daily; at most 40 mg daily."), False),
        ("What is the usual adult dose for a mild ear, nose or throat infection?",
         _fact("dosage", "Dosage", "In adults, 750-1750 mg/day in divided doses."), True),
        ("Which judges sat on the panel?",
         _fact("judges", "Judges", "Howe, Chief Judge; Lund, Circuit Judge"), False),
        ("Which district judge ruled on the case below?",
         _fact("judges", "Judges", "Howe, Chief Judge; Lund, Circuit Judge"), True),
        ("What did the court hold about the plaintiffs' new sweepstakes game?",
         _fact("disposition", "Disposition", "affirmed"), True),
    ],
)  # fmt: skip
def test_a_fact_does_not_answer_a_question_narrower_than_it(question, fact, narrower) -> None:
    assert narrower_than(question, [fact]) is narrower


def test_an_open_answer_that_speaks_of_something_else_is_not_supported() -> None:
    rows = [
        (1, "UNITED STATES COURT OF APPEALS FOR THE FIRST CIRCUIT"),
        (1, "Appeal from the United States District Court for the District of Maine "
            "[Hon. Lena Walsh, U.S. District Judge]"),
    ]  # fmt: skip
    question = "Which district judge ruled on the case below?"
    wrong = _assess(question, "United States Court of Appeals for the First Circuit.", rows)
    assert wrong.status == PARTLY_SUPPORTED
    assert _assess(question, "Lena Walsh, U.S. District Judge.", rows).status == SUPPORTED


def test_the_quote_on_what_the_question_names_settles_it_before_an_earlier_one() -> None:
    rows = [
        (6, "Patients with a creatinine clearance of 30 to 50 mL/min should receive 5 mg every 24 hours."),
        (6, "Patients with a creatinine clearance less than 30 mL/min should receive 5 mg every 48 hours."),
    ]  # fmt: skip
    question = "How often should a patient whose creatinine clearance is below 30 mL/min take it?"
    by_quotes = answer_by_quotes(question, _quotes(rows))
    assert by_quotes is not None and by_quotes.quotes == (1,)
    assert answer_by_quotes("How often should it be taken?", _quotes(rows)).quotes == (0,)


class _SaysNotStated(EchoModel):
    def _answer(self, content: str) -> str:
        return "The document does not say."


def test_an_open_question_a_quote_answers_is_not_answered_not_found() -> None:
    document = make_document(
        [
            "Zelnorat extended-release tablets are taken once daily. "
            "Take the tablets with the evening meal and swallow them whole.",
            "Store at room temperature in a dry place away from children.",
        ]
    )
    result = answer_question(
        document,
        "With which meal should the tablets be taken?",
        _SaysNotStated(),
        max_new_tokens=20,
    )
    assert result.support == "quoted" and "evening meal" in result.text
    assert result.text.endswith("(quoted from p. 1)")
    # Nothing in the document on what is asked: not found, the closest quotes below.
    other = answer_question(
        document, "Which pharmacy chains stock them?", _SaysNotStated(), max_new_tokens=20
    )
    assert other.support == "no_answer" and other.text.startswith("No answer found")


def test_a_cure_or_notice_period_is_not_how_long_the_agreement_lasts() -> None:
    rows = [
        (2, "Licensor may terminate this Agreement if the sublicensee does not cure the breach "
            "within 15 days after notice from Licensor."),
        (4, "This Agreement shall continue in full force and effect for a period of five (5) "
            "years from the Effective Date."),
    ]  # fmt: skip
    question = "How long does the agreement last?"
    assert answer_by_quotes(question, _quotes(rows[:1])) is None
    assert _assess(question, "15 days.", rows[:1]).status != SUPPORTED
    by_quotes = answer_by_quotes(question, _quotes(rows))
    assert by_quotes is not None and by_quotes.quotes == (1,)


def test_how_long_a_duty_survives_the_term_is_not_the_term() -> None:
    rows = [
        (8, "During the term of this Agreement and for a period of seven (7) years after its "
            "termination or expiration each Party shall maintain in confidence the other's data."),
    ]  # fmt: skip
    assert answer_by_quotes("How long does the agreement last?", _quotes(rows)) is None


def test_how_long_an_agreement_remains_in_force_asks_its_term_not_its_renewal() -> None:
    document = make_document(["The term of this Agreement is three (3) years."])
    sentences = DocumentSentences(document.pages)
    facts = [
        KnownFact("expiration_date", "Expiration", "three (3) years", spans=sentences.spans[:1]),
        KnownFact("renewal_term", "Renewal term", "", missing=True),
    ]
    question = "For how long does the agreement remain in force?"
    found = fact_answer(question, facts, sentences, document.passages)
    assert found is not None and found.fact.field == "expiration_date"


SLIP_OPINION = [
    (1, "Argued March 4, 2031—Decided May 20, 2031. The Lakeland Compact allocates water among "
        "three States."),
]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("It was argued on March 4, 2031 and decided on May 20, 2031.", SUPPORTED),
        # Both dates are in the quote, each of the other event: not supported.
        ("It was argued on May 20, 2031 and decided on March 4, 2031.", PARTLY_SUPPORTED),
        # One date answers one of the two questions asked.
        ("It was decided on May 20, 2031.", PARTLY_SUPPORTED),
    ],
)
def test_two_dates_asked_are_two_parts_each_in_its_own_role(answer, expected) -> None:
    question = "When was the case argued, and when was it decided?"
    assert _assess(question, answer, SLIP_OPINION).status == expected


def test_a_fact_that_answers_part_of_a_question_is_completed_by_the_quote_of_the_rest() -> None:
    document = make_document([SLIP_OPINION[0][1]])
    sentences = DocumentSentences(document.pages)
    start = sentences.text.index("May 20")
    facts = [KnownFact("decision_date", "Date", "May 20, 2031", spans=sentences.spans[:1])]
    assert sentences.spans[0][0] <= start < sentences.spans[0][1]
    # (Worded as the field's own question: without an embedder, facts match by shared words.)
    result = answer_question(
        document,
        "What date was the case argued, and what date was it decided?",
        _SaysNotStated(),
        max_new_tokens=20,
        facts=facts,
    )
    assert result.support == SUPPORTED and result.method == "key_fact"
    assert "March 4, 2031" in result.text and "May 20, 2031" in result.text
    # The fact alone answers a question of one date.
    alone = answer_question(
        document,
        "On what date was this case decided?",
        _SaysNotStated(),
        max_new_tokens=20,
        facts=facts,
    )
    assert alone.support == SUPPORTED and "March 4" not in alone.text


COMPLAINT = [
    (2, "The District Court granted summary judgment for the Board on both claims."),
    (2, "Harlow Mills filed suit against the Board in federal court, seeking to enjoin "
        "enforcement of the state permit statutes."),
]  # fmt: skip


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        ("What did Harlow Mills ask the federal court to do when it sued?",
         "It asked the court to enjoin enforcement of the statutes.", SUPPORTED),
        # Summary judgment is in the quotes, but as what the court granted, not as what was sought.
        ("What did Harlow Mills ask the federal court to do when it sued?",
         "Harlow Mills asked for summary judgment.", PARTLY_SUPPORTED),
        # The quote's asker is not the one the question names.
        ("What relief did Keating seek in the suit?",
         "An injunction against the statutes.", PARTLY_SUPPORTED),
    ],
)  # fmt: skip
def test_relief_sought_is_what_the_party_asked_for(question, answer, expected) -> None:
    assert _assess(question, answer, COMPLAINT).status == expected
    quoted = answer_by_quotes(question, _quotes(COMPLAINT))
    assert (quoted is not None and quoted.quotes == (1,)) is ("Keating" not in question)


def test_a_dose_is_read_in_its_own_sentence_not_beside_another_population_s() -> None:
    rows = [
        (1, "In adults, 750 mg every 12 hours. In children older than 3 months, 25 mg/kg/day "
            "every 12 hours. Patients with GFR below 30 mL/min should not take the 875 mg "
            "tablet."),
    ]  # fmt: skip
    question = "How much should a patient whose GFR is below 30 mL/min take?"
    assert _assess(question, "25 mg/kg/day every 12 hours.", rows).status != SUPPORTED
    assert _assess(question, "750 mg every 12 hours.", rows).status != SUPPORTED
    assert _assess("How much should children older than 3 months take?",
                   "25 mg/kg/day every 12 hours.", rows).status == SUPPORTED  # fmt: skip


def test_a_term_with_no_end_answers_how_long_the_agreement_lasts() -> None:
    rows = [
        (2, "Section 4.1. Term. The term of this Agreement commences on the Effective Date and "
            "continues in perpetuity, unless terminated under Section 4.2."),
    ]  # fmt: skip
    question = "How long does the agreement last?"
    assert _assess(question, "It continues in perpetuity.", rows).status == SUPPORTED
    assert _assess(question, "Expiration: perpetual [p. 2]", rows).status == SUPPORTED
    assert _assess(question, "Five years.", rows).status != SUPPORTED
    by_quotes = answer_by_quotes(question, _quotes(rows))
    assert by_quotes is not None and by_quotes.status == SUPPORTED
