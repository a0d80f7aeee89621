"""The support check by meaning (pipelines.answer.assess), as pure functions of question,
answer and quotes: the forms of issue 21's wrong answers, reworded with invented parties and
places, each beside an answer the same rule lets through, so that every rule can fail."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipelines.answer.assess import (
    PARTLY_SUPPORTED,
    QUOTED,
    SUPPORTED,
    UNSUPPORTED,
    answer_by_quotes,
    assess,
)
from pipelines.answer.rejections import (
    CONTRADICTION,
    ECHO,
    FABRICATED_QUOTE,
    PLACEHOLDER,
    TAUTOLOGY,
)

CONTRACT = [
    (1, "This Supply Agreement (the “Agreement”) is made and entered into as of March 3, 2021, "
        "by and between Harrowgate Looms, Inc., a Delaware corporation (“Harrowgate”), and "
        "Pellow Dyeworks LLC (“Pellow”)."),
    (2, "The Agreement supersedes the Mutual Confidentiality Agreement between the parties "
        "dated as of June 9, 2020."),
    (5, "The initial term of this Agreement shall expire on December 31, 2026, and the "
        "Agreement shall automatically renew for successive one-year terms unless either party "
        "gives notice of non-renewal."),
    (8, "This Agreement shall be governed by and construed in accordance with the laws of the "
        "State of Ohio."),
    (9, "Payments are made to an account at the Merchant Bank of Oregon."),
    (11, "By: Jolene Marwick, Chief Executive Officer"),
]  # fmt: skip
OPINION = [
    (1, "IN THE SUPREME COURT OF VERMONT"),
    (1, "No. 21-4567"),
    (1, "DORA QUILLAN, Plaintiff, v. TALLIS FREIGHT CORPORATION, Defendant."),
    (6, "The trial court dismissed her claims for back pay as untimely."),
    (9, "We affirm the dismissal of her claims."),
]
LABEL = [
    (2, "The recommended dose is 10 mg taken orally once daily."),
    (3, "Zelnorat is contraindicated in patients with severe hepatic impairment."),
    (4, "Zelnorat is indicated for the treatment of chronic plaque psoriasis in adults."),
]


@dataclass(frozen=True)
class Quote:
    text: str
    page: int


def _quotes(rows) -> list[Quote]:
    return [Quote(text, page) for page, text in rows]


def _document(rows) -> str:
    return "\n\n".join(text for _, text in rows)


def _assess(question: str, answer: str, rows, **kwargs):
    return assess(question, answer, _quotes(rows), document=_document(rows), **kwargs)


# ---- rejected before any check -------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "answer", "reason", "status"),
    [
        ("Who are the parties to this agreement?",
         "The parties to this agreement are the parties to this agreement, which is the "
         "Agreement.", TAUTOLOGY, QUOTED),
        ("Which law governs?",
         "The document does not say that this agreement is governed by the laws of the State "
         "of Ohio, but rather that it is governed by the laws of the State of Ohio.",
         CONTRADICTION, UNSUPPORTED),
        ("Which law governs?", "The law of Ohio governs, not the law of Ohio.", CONTRADICTION,
         UNSUPPORTED),
        ("Which law governs?", "Ohio law governs this agreement. Paste your answer here.",
         PLACEHOLDER, QUOTED),
        ("Which court decided the case?", "Court: <the court's name> [p. 1]", PLACEHOLDER,
         QUOTED),
        ("Which law governs?", "Governing law: [insert governing law]", PLACEHOLDER, QUOTED),
        ("Which law governs?",
         'Section 14.2 says "This Agreement is governed by the laws of the State of Ohio and '
         'Texas." [p. 3]', FABRICATED_QUOTE, UNSUPPORTED),
        ("Which law governs this agreement?", "The law governs this agreement.", ECHO, QUOTED),
    ],
)  # fmt: skip
def test_answers_that_are_no_answer_are_rejected(question, answer, reason, status) -> None:
    verdict = _assess(question, answer, CONTRACT, prompt=question)
    assert verdict.rejection is not None and verdict.rejection.reason == reason
    assert verdict.status == status and verdict.note


def test_a_fabricated_quote_is_named_and_a_real_one_passes() -> None:
    made_up = 'It says "governed by the laws of the State of Texas" [p. 8].'
    verdict = _assess("Which law governs?", made_up, CONTRACT)
    assert verdict.unsupported_claims == ["governed by the laws of the State of Texas"]
    # Verbatim up to line breaks and a word hyphenated at a line end.
    wrapped = [(8, "This Agreement shall be gov-\nerned by and construed in accordance with\n"
                   "the laws of the State of Ohio.")]  # fmt: skip
    real = 'It says "shall be governed by and construed in accordance with the laws of the State'
    real += ' of Ohio" [p. 8].'
    assert _assess("Which law governs?", real, wrapped).status == SUPPORTED


def test_a_plain_answer_is_not_taken_for_a_tautology_or_a_contradiction() -> None:
    answer = "The parties are Harrowgate Looms, Inc. and Pellow Dyeworks LLC [p. 1]."
    assert _assess("Who are the parties to this agreement?", answer, CONTRACT).status == SUPPORTED
    answer = "Ohio law governs; the parties did not choose another state's courts."
    assert _assess("Which law governs?", answer, CONTRACT).status == SUPPORTED


# ---- the value, in a quote, in its role ----------------------------------------------------


@pytest.mark.parametrize(
    ("question", "answer", "status"),
    [
        # Governing law: the clause names the state.
        ("Which law governs?", "The laws of the State of Ohio govern it [p. 8].", SUPPORTED),
        ("Which law governs?", "Ohio.", SUPPORTED),
        # A place that a governing-law clause contradicts.
        ("Which law governs?", "It is governed by the laws of the State of Delaware.",
         UNSUPPORTED),
        # A place inside a bank's name is no governing law.
        ("Which law governs?", "Payments go to the Merchant Bank of Oregon.", QUOTED),
        # Parties: named in the preamble.
        ("Who are the parties to this agreement?",
         "Harrowgate Looms, Inc. and Pellow Dyeworks LLC.", SUPPORTED),
        ("Who are the parties to this agreement?", "Harrowgate Looms, Inc.", PARTLY_SUPPORTED),
        # A signatory is in a quote, but not as a party.
        ("Who are the parties to this agreement?", "Jolene Marwick and Pellow Dyeworks LLC.",
         PARTLY_SUPPORTED),
        # Dates: the date this agreement was made, not another agreement's.
        ("On what date was this agreement made?", "It was made on March 3, 2021.", SUPPORTED),
        ("On what date was this agreement made?", "It was made on June 9, 2020.",
         PARTLY_SUPPORTED),
        ("On what date was this agreement made?", "It was made on December 31, 2026.",
         PARTLY_SUPPORTED),
        ("On what date was this agreement made?", "It was made on May 5, 2019.", UNSUPPORTED),
        # A two-part question: expiry and renewal.
        ("When does the agreement expire, and does it renew automatically?",
         "It expires on December 31, 2026 and renews automatically for one-year terms.",
         SUPPORTED),
        ("When does the agreement expire, and does it renew automatically?",
         "It expires on December 31, 2026.", PARTLY_SUPPORTED),
        ("When does the agreement expire, and does it renew automatically?",
         "It expires on December 31, 2026 and does not renew.", UNSUPPORTED),
    ],
)  # fmt: skip
def test_contract_answers_by_role(question, answer, status) -> None:
    assert _assess(question, answer, CONTRACT).status == status


@pytest.mark.parametrize(
    ("question", "answer", "status"),
    [
        ("Which court decided the case?", "The Supreme Court of Vermont [p. 1].", SUPPORTED),
        ("Which court decided the case?", "The Supreme Court of Oregon.", UNSUPPORTED),
        ("What is the docket number?", "No. 21-4567.", SUPPORTED),
        ("What is the docket number?", "No. 21-9999.", UNSUPPORTED),
        # The outcome the court orders, not one it describes.
        ("What was the court's holding?", "The court affirmed the dismissal of her claims.",
         SUPPORTED),
        ("What relief did the plaintiff seek and did she get it?", "She was granted relief.",
         UNSUPPORTED),
        ("What was the court's holding?", "The court did not affirm the dismissal.", UNSUPPORTED),
        ("What was the court's holding?", "The court reversed the judgment.", UNSUPPORTED),
        ("Who are the parties and what did the court decide?",
         "Dora Quillan sued Tallis Freight Corporation; the court affirmed the dismissal.",
         SUPPORTED),
        ("Who are the parties and what did the court decide?",
         "The court affirmed the dismissal.", PARTLY_SUPPORTED),
    ],
)  # fmt: skip
def test_opinion_answers_by_role(question, answer, status) -> None:
    assert _assess(question, answer, OPINION).status == status


@pytest.mark.parametrize(
    ("question", "answer", "status"),
    [
        ("What is the recommended dose?", "10 mg once daily [p. 2].", SUPPORTED),
        ("What is the recommended dose?", "20 mg once daily.", UNSUPPORTED),
        ("What are the contraindications?",
         "It is contraindicated in severe hepatic impairment.", SUPPORTED),
        ("What are the contraindications?", "It is contraindicated in pregnancy.",
         UNSUPPORTED),
        ("What is the drug indicated for?", "Chronic plaque psoriasis in adults.", SUPPORTED),
        ("What is the drug indicated for?", "Chronic plaque psoriasis and asthma in children.",
         PARTLY_SUPPORTED),
    ],
)  # fmt: skip
def test_label_answers_by_role(question, answer, status) -> None:
    assert _assess(question, answer, LABEL).status == status


def test_what_is_missing_is_said() -> None:
    verdict = _assess(
        "When does the agreement expire, and does it renew automatically?",
        "It expires on December 31, 2026.",
        CONTRACT,
    )
    assert verdict.note == "Partly supported: it does not say whether it renews."
    verdict = _assess("Who are the parties to this agreement?", "Harrowgate Looms, Inc.", CONTRACT)
    assert "name only one party" in verdict.note


# ---- open questions: the answer's words in one or two quotes --------------------------------


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("Either party may give notice of non-renewal.", SUPPORTED),
        ("Either party may give notice of non-renewal by fax to the tribunal.", PARTLY_SUPPORTED),
        ("Neither party may give notice of non-renewal.", UNSUPPORTED),
        ("The goods must be insured by the carrier at all times.", UNSUPPORTED),
    ],
)
def test_open_questions_by_lexical_entailment(answer, status) -> None:
    assert _assess("What may either party give?", answer, CONTRACT).status == status


# ---- a quote as the answer -------------------------------------------------------------------


def test_the_quote_that_states_it_answers_and_not_found_needs_nothing_relevant() -> None:
    question = "When does the agreement expire, and does it renew automatically?"
    by_quotes = answer_by_quotes(question, _quotes(CONTRACT))
    assert by_quotes is not None and by_quotes.status == SUPPORTED
    assert [CONTRACT[i][0] for i in by_quotes.quotes] == [5]
    assert answer_by_quotes("Which law governs?", _quotes(CONTRACT[:2])) is None
    # One part only: the outcome is quoted, the parties are not.
    partly = answer_by_quotes(
        "Who are the parties and what did the court decide?", _quotes(OPINION[3:])
    )
    assert partly is not None and partly.status == PARTLY_SUPPORTED
    assert "the parties" in partly.note
    # An open question is never settled by a quote alone.
    assert answer_by_quotes("What may either party give?", _quotes(CONTRACT)) is None
