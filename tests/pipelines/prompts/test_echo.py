"""The prompt-echo guard (pipelines/prompts/echo.py): every sentence of every prompt template the
pipelines send is caught, as sent and as a model reworded it, and so are chat placeholders;
real-looking summary and answer sentences of invented documents are not."""

from __future__ import annotations

import pytest

from pipelines.collection.sources import SourceQuote
from pipelines.facts.fields import SCHEMAS
from pipelines.facts.prompts import field_messages
from pipelines.ingest.sentences import split_sentences
from pipelines.prompts.collection import answer_messages
from pipelines.prompts.echo import drop_prompt_sentences, overlaps_prompt
from pipelines.prompts.quoted_question import quoted_question_messages
from pipelines.prompts.templates import (
    TEMPLATES,
    combine_messages,
    document_block,
    question_messages,
    section_messages,
    summary_messages,
)
from pipelines.retrieval.evidence import Evidence

# Rendered here as a real call renders them: a document with a title, pages of its own, a quote.
QUOTE = Evidence("The tenant pays rent monthly.", 2, 0, 0, 29, 1.0)
DOCUMENT = document_block("Office Lease", "[p. 1]\nThe tenant pays rent monthly.")


def _sentences(text: str) -> list[str]:
    return [line[s:e] for line in text.splitlines() for s, e in split_sentences(line)]


def _task(messages: list[dict[str, str]]) -> str:
    """What a conversation says besides the document and the quotes: the system message and
    the user message without its document block and quote lines."""
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    user = messages[-1]["content"].replace(DOCUMENT, "")
    lines = [line for line in user.splitlines() if QUOTE.text not in line]
    return system + "\n" + "\n".join(lines)


def _instruction_sentences() -> list[str]:
    conversations = []
    for template in TEMPLATES.values():
        conversations += [
            summary_messages(DOCUMENT, template),
            section_messages(DOCUMENT, template, 12, 19),
            section_messages(DOCUMENT, template, 7, 7),
            combine_messages("Office Lease", template, [(1, 3, QUOTE.text)]),
            combine_messages(None, template, [(1, 3, QUOTE.text)]),
        ]
    conversations += [
        question_messages(DOCUMENT, "Who pays the rent?"),
        quoted_question_messages(DOCUMENT, [QUOTE], "Who pays the rent?"),
        quoted_question_messages(DOCUMENT, [], "Who pays the rent?"),
        answer_messages(DOCUMENT, [SourceQuote(1, "Office Lease", QUOTE)], "Who pays the rent?"),
        answer_messages(DOCUMENT, [], "Who pays the rent?"),
    ]
    found = []
    for messages in conversations:
        for sentence in _sentences(_task(messages)):
            words = sentence.replace("Question:", "").split()
            if len(words) >= 2 and "Who pays the rent?" not in sentence:  # not the asked one
                found.append(sentence)
    return found


def _facts_sentences() -> tuple[list[str], list[str]]:
    """The facts prompts' own sentences (system, questions), and their examples' sentences of
    five words or more (a shorter line, "INDICATIONS AND USAGE", is a heading any label has)."""
    asked, examples = [], []
    for schema in SCHEMAS.values():
        for spec in schema:
            messages = field_messages(spec, [QUOTE])
            asked += _sentences(messages[0]["content"])
            for message in messages[1:]:
                if message["role"] != "user":
                    continue  # the example's answer: a value, not a prompt
                quote, question = message["content"].split("\nQuestion: ")
                asked += _sentences(f"Question: {question}")
                if QUOTE.text not in quote:
                    examples += [s for s in _sentences(quote) if len(s.split()) >= 5]
    return asked, examples


INSTRUCTION_SENTENCES = _instruction_sentences()
ASKED, EXAMPLES = _facts_sentences()

# Echoes as the default model writes them: reworded, page numbers and citations of its own.
REWORDED = [
    "This is one part of a longer contract.",
    "This is one part (pages 23-31) of a longer court opinion [p. 23].",
    "Combine these part summaries into one summary of the whole medical document.",
    "Keep page citations.",
    "Do not add any facts that are not in the text.",
    "Cover the text with a brief summary of the contract's payment terms.",
    "The summary covers the parties, term, obligations, payment, termination and governing law.",
    "Summarize this part briefly, citing pages as [p. 4].",
    "Answer: Use only facts stated in the document you are given.",
    "Answer the question below using only the quotes and the document above.",
    "If the documents do not say, answer that they do not say.",
    "What is the title of this document?",
    "It does not include facts that are not in the text.",
    "The parties to this agreement are the parties to this agreement.",
]
PLACEHOLDERS = [
    "Paste your answer here.",
    "[Your answer]",
    "Insert the name of the court here.",
    "Type your summary here.",
    "Answer: Please insert the answer here.",
    "<your answer>",
    "The summary goes here.",
    "Answer: {answer}",
    # The model writing the next turn of a prompt: a question under its "Question:" label.
    "Question: When was the agreement made?",
]
# Summary and answer sentences of invented documents, each in its genre's words, several made
# only of a prompt's topic words ("court", "affirmed", "dismissal"), several saying what a
# document does not say.
REAL_SENTENCES = [
    # opinions
    "The court affirmed the dismissal.",
    "The court reversed the judgment and remanded for a new trial.",
    "The court held that the statute of limitations barred the claim.",
    "The Court of Appeals of Westmarch decided the case on May 2, 2011.",
    "The opinion was issued by the court on March 3, 2019.",
    "The summary judgment for the county was affirmed.",
    "The appellant argued that the trial court erred in excluding the expert testimony.",
    "The question decided was whether the ordinance takes property without compensation.",
    "The parties dispute whether the notice was timely.",
    "Judge Ormsby wrote for a unanimous panel.",
    # labels
    "The boxed warning describes a risk of serious bleeding.",
    "Dosing depends on kidney function.",
    "The recommended dose is 20 mg once daily for adults.",
    "Zolmitra is indicated for the treatment of moderate plaque psoriasis in adults.",
    "The drug is contraindicated in patients with severe hepatic impairment.",
    "Warnings include liver injury, low blood counts and serious infections.",
    "Do not use Zolmitra during pregnancy.",
    "Patients should take the tablets with food at the same time each day.",
    # contracts
    "The payment terms are governed by Delaware law.",
    "The agreement is governed by state law.",
    "The parties' obligations include monthly payment of rent.",
    "Either party may terminate on thirty days' written notice.",
    "This agreement is effective as of June 1, 2012.",
    "Neither party may assign this Agreement without the other party's prior written consent.",
    "The licensee must pay royalties of five percent of net sales each quarter.",
    "The term is three years and renews for one-year periods unless a party gives notice.",
    "The supplier must keep the records for the period the law requires.",
    "The contract is a master services agreement between Brightwater Ltd. and Kestrel Inc.",
    # A key-fact question's words, with the answer among them.
    "This agreement is governed by the laws of Vermont, the state whose law governs it.",
    "If the lease does not say, the statute supplies the default rule.",
    # guidelines, papers
    "The guideline covers adults with long-term back pain.",
    "The trial enrolled 240 adults with type 2 diabetes.",
    "The main findings were a lower rate of falls and fewer hospital stays.",
    # answers that say the document does not say
    "The document does not say.",
    "The document above does not say.",
    "The documents do not say.",
    "The quotes and the document do not say.",
    "The document does not say who pays for repairs.",
    "The lease does not say when the rent is due.",
    "The type of cover given here is limited to fire and flood.",
    "Tenants write to the address printed here for repairs.",
    "The document does not contain a specific answer to this question.",
]


@pytest.mark.parametrize("sentence", INSTRUCTION_SENTENCES + ASKED)
def test_every_sentence_of_every_prompt_template_is_caught(sentence) -> None:
    assert overlaps_prompt(sentence)
    assert overlaps_prompt(f"{sentence} [p. 3]")


def test_the_templates_were_rendered_in_full() -> None:
    # Guards the test itself: every template's tasks and every field's question went through.
    assert len(INSTRUCTION_SENTENCES) >= 4 * 5 * 3
    assert len(ASKED) >= sum(len(schema) for schema in SCHEMAS.values())
    assert "Keep the page citations [p. N]." in INSTRUCTION_SENTENCES
    assert "This is one part (pages 12-19) of a longer court opinion." in INSTRUCTION_SENTENCES


@pytest.mark.parametrize("sentence", EXAMPLES)
def test_a_copy_of_a_facts_example_is_caught_unless_the_document_says_it(sentence) -> None:
    assert overlaps_prompt(sentence)
    # The examples are in the genre's words: a document may say the same, and then it is its own.
    assert not overlaps_prompt(sentence, document=f"Preamble.\n\n{sentence}\n\nEnd.")


@pytest.mark.parametrize("sentence", REWORDED + PLACEHOLDERS)
def test_reworded_echoes_and_placeholders_are_caught(sentence) -> None:
    assert overlaps_prompt(sentence)


@pytest.mark.parametrize("sentence", REAL_SENTENCES)
def test_real_summary_and_answer_sentences_are_not_caught(sentence) -> None:
    assert not overlaps_prompt(sentence)


def test_a_summary_loses_its_echoes_and_keeps_its_lines_and_labels() -> None:
    text = (
        "Pages 1-3: The tenant pays rent monthly [p. 2]. This is one part of a longer lease.\n"
        "Pages 4-6: Keep the page citations [p. N].\n"
        "\n"
        "- The landlord repairs the roof [p. 5].\n"
        "Paste your answer here."
    )
    kept, num_dropped = drop_prompt_sentences(text)
    assert kept == (
        "Pages 1-3: The tenant pays rent monthly [p. 2].\n\n- The landlord repairs the roof [p. 5]."
    )
    assert num_dropped == 3
    real = " ".join(REAL_SENTENCES)
    assert drop_prompt_sentences(real) == (real, 0)  # nothing dropped: the text as written
