"""What a question asks for, read from its wording, and whether a text states it."""

from __future__ import annotations

import pytest

from pipelines.answer.asked import (
    AMOUNT,
    BOXED,
    CONTRAINDICATION,
    COURT,
    DATE,
    DOCKET,
    DOSE,
    EXPIRY,
    INDICATION,
    JURISDICTION,
    NAMES,
    OPEN,
    OUTCOME,
    PARTY,
    PERIOD,
    PLACE,
    RELIEF,
    RENEWAL,
    WARNING,
    asked_kind,
    asked_parts,
    holding_first,
    holds,
)
from pipelines.retrieval.evidence import Evidence


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Which state's or country's law governs this agreement?", PLACE),
        ("Under which law is the agreement governed?", PLACE),
        ("What is the governing law?", PLACE),
        ("On what date was this agreement made?", DATE),
        ("What is the effective date?", DATE),
        ("When was the agreement signed?", DATE),
        ("How long is the initial term?", PERIOD),
        ("What is the notice period to terminate renewal?", PERIOD),
        ("How much is the license fee?", AMOUNT),
        ("What is the recommended dose?", AMOUNT),
        ("Who are the parties to this agreement?", NAMES),
        ("Which court decided the case?", NAMES),
        # Kinds that cannot be read from the wording: any answer will do.
        ("When can the agreement be terminated?", None),
        ("What does the law say about refunds?", None),
        ("Why did the court reverse?", None),
        ("What are the obligations of the parties?", None),
        ("What is the boxed warning?", None),
    ],
)
def test_the_kind_asked_for_is_read_from_ordinary_question_forms(question, kind) -> None:
    assert asked_kind(question) == kind


def test_holds_finds_each_kind_and_ignores_lookalikes() -> None:
    assert holds("It is governed by the laws of the State of Ohio.", PLACE)
    assert not holds("It is governed by the laws of the state.", PLACE)
    assert holds("Signed on 19 December 2018.", DATE) and not holds("Signed today.", DATE)
    assert holds("within thirty (30) days", PERIOD) and not holds(
        "within a reasonable time", PERIOD
    )
    assert holds("a fee of $5,000", AMOUNT) and not holds("on March 3, 2021", AMOUNT)
    assert holds("between Acme Corp. and Beta Capital LLC", NAMES)
    assert holds("anything at all", None)


def _quote(text: str, score: float) -> Evidence:
    return Evidence(
        text=text, page=1, passage_ordinal=0, start_char=0, end_char=len(text), score=score
    )


def test_quotes_that_state_the_kind_come_first_each_group_in_its_order() -> None:
    quotes = [
        _quote("The law of the land applies.", 3.0),
        _quote("Ohio law governs this Agreement.", 2.0),
        _quote("The parties agree on the law.", 1.5),
        _quote("A Delaware corporation signs.", 1.0),
    ]
    ordered = holding_first(quotes, PLACE)
    assert [q.score for q in ordered] == [2.0, 1.0, 3.0, 1.5]
    assert holding_first(quotes, None) == quotes


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("When does the agreement expire, and does it renew automatically?",
         [EXPIRY, RENEWAL]),
        ("What relief did the plaintiff seek and did she get it?", [RELIEF, OUTCOME]),
        ("Who are the parties and what did the court decide?", [PARTY, OUTCOME]),
        ("What was the court's holding?", [OUTCOME]),
        ("Which court decided the case?", [COURT]),
        ("Which law governs?", [JURISDICTION]),
        ("On what date was this agreement made?", [DATE]),
        ("What is the docket number?", [DOCKET]),
        ("What is the recommended dose for adults?", [DOSE]),
        ("What are the contraindications?", [CONTRAINDICATION]),
        ("What is the boxed warning?", [BOXED]),
            # What a question sets aside is not asked.
            ("Besides the boxed warning, what warnings does the label give?", [WARNING]),
        ("What is the drug indicated for?", [INDICATION]),
        ("What is the notice period to terminate renewal?", [PERIOD]),
        ("How much is the license fee?", [AMOUNT]),
        # "and" between nouns does not make a second part.
        ("What are the terms and conditions of payment?", [OPEN]),
        ("Who can terminate the agreement?", [OPEN]),
    ],
)  # fmt: skip
def test_the_parts_of_a_question_each_with_its_kind(question, kinds) -> None:
    assert [part.kind for part in asked_parts(question)] == kinds
