"""Issue 21's wrong answers through answer_question, the model scripted (the FixedModel form of
tests.pipelines.echo_model: the real default model cannot be made to write each case): none is
marked supported as written, a made-up quote is never shown as the answer, model citations of
pages without the supporting text are dropped, and a passage that answers the question is the
answer rather than "not found"."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.answer.check import NOT_FOUND_TEXT
from pipelines.answer.from_facts import KnownFact
from pipelines.answer.question import answer_question
from pipelines.retrieval.evidence import DocumentSentences
from tests.pipelines.echo_model import EchoModel, make_document

OPINION_PAGES = [
    "IN THE SUPREME COURT OF VERMONT\n\nNo. 21-4567\n\nDORA QUILLAN, Plaintiff, v. TALLIS "
    "FREIGHT CORPORATION, Defendant.",
    "Quillan sought back pay and reinstatement. The trial court dismissed her claims for back "
    "pay as untimely.",
    "We affirm the dismissal of her claims for relief.",
]
CONTRACT_PAGES = [
    "This Supply Agreement is made and entered into as of March 3, 2021, by and between "
    "Harrowgate Looms, Inc., a Delaware corporation, and Pellow Dyeworks LLC, an Ohio limited "
    "liability company.",
    "Harrowgate shall deliver the yarn within ten days of each order.",
    "The initial term of this Agreement shall expire on December 31, 2026, and this Agreement "
    "shall automatically renew for successive one-year terms unless either party gives notice.",
    "This Agreement shall be governed by and construed in accordance with the laws of the State "
    "of Ohio.",
]


@dataclass
class ScriptedModel(EchoModel):
    answer: str = ""

    def _answer(self, content: str) -> str:
        return self.answer


def _ask(pages, question: str, answer: str, **kwargs):
    document = make_document(pages, kind="legal", max_tokens=30)
    model = ScriptedModel(answer=answer)
    return answer_question(document, question, model, max_new_tokens=80, **kwargs), document


def test_a_wrong_outcome_is_set_apart_and_the_order_is_the_answer() -> None:
    result, _ = _ask(
        OPINION_PAGES,
        "What relief did the plaintiff seek and did she get it?",
        "She was granted relief [p. 3].",
    )
    assert result.model_text == "She was granted relief [p. 3]."
    assert "We affirm the dismissal of her claims for relief." in result.text
    assert result.text.endswith("(quoted from p. 3)")
    # What relief she sought is not settled by a quote alone.
    assert result.support == "partly_supported" and result.stats["support_missing"]
    assert result.cited_pages == [3]


def test_a_placeholder_stored_as_a_fact_is_never_the_answer() -> None:
    document = make_document(OPINION_PAGES, kind="legal", max_tokens=30)
    sentences = DocumentSentences(document.pages)
    start = sentences.text.index("IN THE SUPREME COURT")
    court = KnownFact(
        field="court", label="Court", value="<the court's name>", spans=((start, start + 31),)
    )
    model = ScriptedModel(answer="The Supreme Court of Vermont decided the case [p. 1].")
    result = answer_question(
        document, "Which court decided the case?", model, max_new_tokens=80, facts=[court]
    )
    assert "<the court's name>" not in result.text
    assert result.method != "key_fact" and len(model.prompts) == 1
    assert result.support == "supported"


def test_a_placeholder_in_the_models_answer_is_not_shown_as_the_answer() -> None:
    result, _ = _ask(
        CONTRACT_PAGES, "Which law governs?", "Ohio law governs. Paste your answer here."
    )
    # The placeholder sentence is dropped before the check (pipelines.prompts.echo), never
    # shown, not even set apart; what the model said besides is checked on its own.
    assert "Paste your answer here" not in result.text
    assert "Paste your answer here" not in (result.model_text or "")
    assert result.stats["num_prompt_sentences_dropped"] == 1
    assert result.support == "supported" and result.cited_pages == [4]


def test_a_tautology_and_a_self_contradiction_are_never_the_answer() -> None:
    for answer in (
        "The parties to this agreement are the parties to this agreement.",
        "The document does not say that this agreement is governed by the laws of the State of "
        "Ohio, but rather that it is governed by the laws of the State of Ohio.",
    ):
        question = (
            "Who are the parties to this agreement?"
            if "parties" in answer
            else ("Which law governs?")
        )
        result, _ = _ask(CONTRACT_PAGES, question, answer)
        # Set apart, or dropped altogether where it repeats a prompt's own question.
        assert result.text != answer and result.model_text in (answer, None)
        assert "(quoted from p." in result.text


def test_a_made_up_quote_is_never_shown_as_a_quote() -> None:
    made_up = (
        'Section 14.2 provides: "This Agreement shall be governed by the laws of the State of '
        'Texas." [p. 2]'
    )
    result, document = _ask(CONTRACT_PAGES, "Which law governs?", made_up)
    assert "Texas" not in result.text and result.model_text == made_up
    text = "\n\n".join(page.text for page in document.pages)
    for quote in result.quotes:
        assert quote.text in text


def test_a_citation_of_a_page_without_the_supporting_text_is_replaced() -> None:
    result, _ = _ask(
        CONTRACT_PAGES, "Which law governs?", "The laws of the State of Ohio govern it [p. 2]."
    )
    assert result.support == "supported"
    assert "[p. 2]" not in result.text and result.cited_pages == [4]
    assert result.text.endswith("Sources: [p. 4]")


def test_not_found_is_not_the_answer_when_a_quote_states_it() -> None:
    result, _ = _ask(
        CONTRACT_PAGES,
        "When does the agreement expire, and does it renew automatically?",
        "The document does not say.",
    )
    assert result.support == "supported" and result.text != NOT_FOUND_TEXT
    assert "shall expire on December 31, 2026" in result.text
    assert "automatically renew" in result.text


def test_an_answer_of_one_part_of_two_is_partly_supported_and_says_what_is_missing() -> None:
    # No sentence says whether it renews: the answer stands, partly supported.
    pages = [*CONTRACT_PAGES]
    pages[2] = "The initial term of this Agreement shall expire on December 31, 2026."
    result, _ = _ask(
        pages,
        "When does the agreement expire, and does it renew automatically?",
        "It expires on December 31, 2026 [p. 3].",
    )
    assert result.support == "partly_supported"
    assert result.text.startswith("It expires on December 31, 2026")
    assert "whether it renews" in result.stats["support_missing"]
