"""Questions that the structure-read key facts answer (pipelines.answer.from_facts): the court's
decision, a party's role, the dose for a population, the contraindications, a contract's
expiration with its renewal; each with the fact's own quote and page, no model call."""

from __future__ import annotations

import pytest

from pipelines.answer.from_facts import KnownFact, fact_answer
from pipelines.facts.extract import extract_facts
from pipelines.retrieval.evidence import DocumentSentences
from tests.pipelines import structured_documents as docs
from tests.pipelines.facts_documents import ScriptedModel, text_document


def _known(document) -> tuple[list[KnownFact], DocumentSentences]:
    facts = []
    for fact in extract_facts(document, ScriptedModel()).facts:
        spans = tuple((quote.start_char, quote.end_char) for quote in fact.evidence)
        facts.append(
            KnownFact(
                fact.field,
                fact.label,
                fact.value,
                spans if fact.value else (),
                missing=not fact.value,
                origin=fact.origin,
                table=fact.table,
            )
        )
    return facts, DocumentSentences(document.pages)


def _answer(document, question: str):
    facts, sentences = _known(document)
    return fact_answer(question, facts, sentences, document.passages)


OPINION = text_document(docs.OPINION_PAGES)
LABEL = text_document(docs.SPL_PAGES, kind="medical")
CONTRACT = text_document(docs.CONTRACT_PAGES)


@pytest.mark.parametrize(
    "question",
    ["What was the court's holding?", "What did the court decide?", "What was the decision?"],
)
def test_the_decision_is_the_conclusions_disposition(question) -> None:
    answer = _answer(OPINION, question)
    assert answer is not None and answer.found
    assert answer.text == "Disposition: reversed and remanded [p. 3]"
    assert answer.quotes[0].text == "REVERSED AND REMANDED."


@pytest.mark.parametrize(
    ("question", "text"),
    [
        ("Who is the appellant?", "Appellant: ORLANDO PETRAKIS-VANE [p. 1]"),
        ("Who was the appellee?", "Appellee: HOLLOWAY DRAINAGE DISTRICT [p. 1]"),
        (
            "Who are the parties?",
            "Parties and roles: ORLANDO PETRAKIS-VANE (plaintiff-appellant); "
            "HOLLOWAY DRAINAGE DISTRICT (defendant-appellee) [p. 1]",
        ),
    ],
)
def test_parties_and_their_roles_come_from_the_caption(question, text) -> None:
    answer = _answer(OPINION, question)
    assert answer is not None and answer.text == text
    assert "Plaintiff, Appellant," in answer.quotes[0].text


def test_the_dose_for_a_population_is_its_rows() -> None:
    answer = _answer(LABEL, "What is the dose for adults?")
    assert answer is not None
    assert (
        answer.text
        == "Dosage and administration (Adults): 10 mg once daily; 20 mg once daily [p. 3]"
    )
    assert [quote.text for quote in answer.quotes] == [
        "Psoriasis Adults 10 mg once daily",
        "Psoriatic arthritis Adults 20 mg once daily",
    ]
    general = _answer(LABEL, "What dose is recommended?")
    assert general is not None and general.text.startswith(
        "Dosage and administration: Adults: 10 mg"
    )


def test_contraindications_and_boxed_warning_are_their_sections() -> None:
    answer = _answer(LABEL, "What are the contraindications?")
    assert (
        answer is not None and answer.text == "Contraindications: Severe hepatic impairment. [p. 1]"
    )
    boxed = _answer(LABEL, "Is there a boxed warning?")
    assert boxed is not None and boxed.text.startswith(
        "Boxed warning: WARNING: SEVERE LIVER INJURY"
    )
    pages = [page.replace("WARNING: SEVERE LIVER INJURY\n", "") for page in docs.SPL_PAGES]
    without = text_document(pages, kind="medical")
    missing = _answer(without, "What does the boxed warning say?")
    assert missing is not None and not missing.found
    assert missing.text.startswith("No boxed warning found")


def test_expiration_and_renewal_are_answered_together() -> None:
    answer = _answer(CONTRACT, "When does the agreement expire and does it renew?")
    assert answer is not None
    assert answer.text == "Expiration: three (3) years [p. 2] Renewal term: one (1) year [p. 2]"
    assert len(answer.quotes) == 2 and "automatically renew" in answer.quotes[1].text
    licensee = _answer(CONTRACT, "Who is the licensee?")
    assert licensee is not None and licensee.text == "Licensee: Pellucid Freight LLC [p. 1]"


@pytest.mark.parametrize(
    "question",
    ["When can the agreement be terminated?", "Who pays for the audit?", "What is the price?"],
)
def test_questions_no_cue_names_are_left_alone(question) -> None:
    assert _answer(CONTRACT, question) is None
