"""`bench/quality.py --self-test`: the scorer, the label file and the prompt-text check on
invented answers, with no model and no corpus (the repo's tests do not cover bench/).

Every value here is invented; none is from a corpus document.
"""

from __future__ import annotations

from collections.abc import Callable

from bench import _answer_scoring as scoring
from bench._answer_scoring import Expectation, form_matches, judge
from bench._labelled_scores import fact_outcomes, is_wrong_supported
from bench._prompt_echo import echoes, prompt_phrases
from bench._question_labels import (
    MIN_QUESTIONS,
    DocumentLabels,
    FactLabel,
    LabelError,
    _question,
    load_labels,
)

DATE = Expectation.of([["2031-03-05"]])
LAW = Expectation.of([["Vermont"]])
TERM = Expectation.of([["2031-12-31"], ["not renew", "no renewal"]])
USES = Expectation.of([["sunburn"], ["insect bites"], ["rash"]], need=2)
PARTIES = Expectation.of([["Alder Works"], ["Birch Labs"]])
OUTCOME = Expectation.of([["affirm", "affirmed"]])
LAW_ABSENT = Expectation.of([["redacted"]], absent=True)
BOXED_ABSENT = Expectation.of([["no boxed warning"]], absent=True)
QUOTE = '"{}" (quoted from p. 3)'


def _outcome(kind: str, expectation: Expectation, answer: str, status: str = "supported") -> str:
    return judge(kind, expectation, answer, status).outcome


CASES: list[tuple[str, Callable[[], bool]]] = [
    ("date right", lambda: _outcome("date", DATE, "It is dated March 5, 2031 [p. 1].") == "right"),
    ("date wrong", lambda: _outcome("date", DATE, "It was signed on 4 June 2030.") == "wrong"),
    (
        "abstains",
        lambda: (
            _outcome("date", DATE, "The document does not say when it was signed.", "unchecked")
            == "abstained"
        ),
    ),
    (
        "abstaining but stating a date is wrong",
        lambda: _outcome("date", DATE, "It does not say; it expires on 1 May 2030.") == "wrong",
    ),
    (
        "no_answer status abstains",
        lambda: (
            _outcome("date", DATE, "No agreement date found: none does.", "no_answer")
            == "abstained"
        ),
    ),
    (
        "a quoted fallback is judged by its quote",
        lambda: (
            judge("date", DATE, QUOTE.format("Made on March 5, 2031 by the parties."), "quoted")
            == scoring.Verdict("right", "states an accepted form", 1, True)
        ),
    ),
    (
        "a quote saying 'does not state' is not abstaining",
        lambda: (
            _outcome("date", DATE, QUOTE.format("The seller does not state a warranty."), "quoted")
            == "missed"
        ),
    ),
    (
        "law right",
        lambda: _outcome("governing_law", LAW, "The laws of the State of Vermont.") == "right",
    ),
    (
        "law wrong",
        lambda: _outcome("governing_law", LAW, "It is governed by Oregon law.") == "wrong",
    ),
    (
        "two parts: one",
        lambda: _outcome("expiration", TERM, "It ends on December 31, 2031.") == "partial",
    ),
    (
        "two parts: both",
        lambda: (
            _outcome("expiration", TERM, "It ends December 31, 2031 and does not renew.") == "right"
        ),
    ),
    ("need 2 of 3: one", lambda: _outcome("indications", USES, "It treats sunburn.") == "partial"),
    ("need 2 of 3: two", lambda: _outcome("indications", USES, "Sunburn and a rash.") == "right"),
    (
        "names of other parties are wrong",
        lambda: _outcome("parties", PARTIES, "Cedar Inc. and Dune LLC.") == "wrong",
    ),
    (
        "a year given as a docket number",
        lambda: _outcome("docket", Expectation.of([["12-345"]]), "It is 2020.") == "wrong",
    ),
    ("another disposition", lambda: _outcome("disposition", OUTCOME, "It reversed.") == "wrong"),
    (
        "no disposition",
        lambda: _outcome("disposition", OUTCOME, "It read the statute.") == "missed",
    ),
    ("inflections", lambda: form_matches("dismiss", "The appeal was dismissed.")),
    ("not any ending", lambda: not form_matches("affirm", "An affirmative defence.")),
    ("thousands", lambda: form_matches("2,000 mg", "up to 2000 mg a day")),
    ("dashes", lambda: form_matches("12-345", "No. 12–345")),
    ("anchored", lambda: form_matches("^no", "No, it should not.")),
    ("anchored is a word", lambda: not form_matches("^no", "Not recommended.")),
    ("periods", lambda: form_matches("P60D", "within sixty (60) days")),
    (
        "absent: says so",
        lambda: _outcome("governing_law", LAW_ABSENT, "It is redacted.") == "right",
    ),
    (
        "absent: abstains",
        lambda: _outcome("governing_law", LAW_ABSENT, "The document does not say.") == "right",
    ),
    ("absent: a value", lambda: _outcome("governing_law", LAW_ABSENT, "New York law.") == "wrong"),
    (
        "absent: a quote without a value",
        lambda: (
            _outcome("governing_law", LAW_ABSENT, QUOTE.format("Notices are in writing."))
            == "missed"
        ),
    ),
    (
        "absent text kind: anything else is wrong",
        lambda: _outcome("boxed_warning", BOXED_ABSENT, "It warns of serious rash.") == "wrong",
    ),
    (
        "absent text kind: none",
        lambda: _outcome("boxed_warning", BOXED_ABSENT, "There is no boxed warning.") == "right",
    ),
    (
        "wrong and supported",
        lambda: (
            is_wrong_supported({"outcome": "wrong", "status": "supported"})
            and not is_wrong_supported({"outcome": "wrong", "status": "partly_supported"})
        ),
    ),
    (
        "a question may not state its own answer",
        lambda: _raises(
            lambda: _question(
                {
                    "id": "x",
                    "kind": "court",
                    "question": "Was it the Tax Court?",
                    "expect": [["Tax Court"]],
                },
                "opinion",
            )
        ),
    ),
    (
        "key facts: right, none found, not extracted, absent",
        lambda: (
            fact_outcomes(
                {
                    "court": {"value": "Court of Tax Appeals", "source": "rule"},
                    "judges": {"value": "", "source": "none"},
                    "lower_docket_number": {"value": "No. 9-87", "source": "rule"},
                },
                DocumentLabels(
                    "x.pdf",
                    "opinion",
                    (),
                    (
                        FactLabel("court", Expectation.of([["Tax Appeals"]]), ()),
                        FactLabel("judges", Expectation.of([["Quill"]]), ()),
                        FactLabel("disposition", Expectation.of([["affirm"]]), ()),
                        FactLabel("lower_docket_number", Expectation.of([], absent=True), ()),
                    ),
                ),
            )
            == {
                "court": {"outcome": "right", "absent": False},
                "judges": {"outcome": "none found", "absent": False},
                "disposition": {"outcome": "not extracted", "absent": False},
                "lower_docket_number": {"outcome": "wrong", "absent": True},
            }
        ),
    ),
]


def _raises(call: Callable[[], object]) -> bool:
    try:
        call()
    except LabelError:
        return True
    return False


def _echo_cases() -> list[tuple[str, bool]]:
    phrases = prompt_phrases()
    return [
        ("prompt templates rendered", bool(phrases.grams) and not phrases.unavailable),
        (
            "an instruction is prompt text",
            bool(echoes("Do not add facts that are not in the text.", phrases)),
        ),
        ("a placeholder is prompt text", bool(echoes("Paste your answer here.", phrases))),
        ("a plain sentence is not", not echoes("The lessee pays rent monthly [p. 2].", phrases)),
    ]


def main() -> int:
    results = [(name, check()) for name, check in CASES] + _echo_cases()
    documents = load_labels()
    results.append(
        (
            "every document has enough questions",
            all(len(d.questions) >= MIN_QUESTIONS for d in documents),
        )
    )
    failed = [name for name, ok in results if not ok]
    for name in failed:
        print(f"FAILED: {name}")
    questions = sum(len(d.questions) for d in documents)
    print(
        f"self-test: {len(results) - len(failed)}/{len(results)} checks passed; "
        f"labels: {len(documents)} documents, {questions} questions"
    )
    return 1 if failed else 0
