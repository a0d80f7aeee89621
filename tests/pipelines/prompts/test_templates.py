from pipelines.documents import PageText
from pipelines.prompts.templates import (
    CONTRACT,
    COURT_OPINION,
    GENERAL,
    MEDICAL,
    SYSTEM_PROMPT,
    choose_template,
    combine_messages,
    document_block,
    question_messages,
    render_pages,
    render_passages,
    section_messages,
    summary_messages,
)
from tests.pipelines.echo_model import make_document

CONTRACT_TEXT = (
    "This Agreement is made between the parties hereto. Each party shall pay the fees. "
    "The term of this Agreement is two years."
)
OPINION_TEXT = (
    "The plaintiff appealed. The court held that the statute applies, and the judgment is "
    "affirmed. Opinion of the court by Judge Lee; the appellant lost."
)


def pages_of(*texts: str) -> tuple[PageText, ...]:
    return tuple(PageText(n, t) for n, t in enumerate(texts, start=1))


def test_template_by_kind_and_legal_cues() -> None:
    assert choose_template("medical", pages_of("Dose 5 mg daily.")) is MEDICAL
    assert choose_template("other", pages_of(CONTRACT_TEXT)) is GENERAL
    assert choose_template("legal", pages_of(CONTRACT_TEXT)) is CONTRACT
    assert choose_template("legal", pages_of(OPINION_TEXT)) is COURT_OPINION
    assert choose_template("legal", pages_of("Nothing legal here.")) is CONTRACT


def test_templates_name_their_topics_in_the_summary_task() -> None:
    block = document_block("T", render_pages(pages_of(CONTRACT_TEXT)))
    contract_task = summary_messages(block, CONTRACT)[-1]["content"]
    for topic in ("parties", "term", "obligations", "payment", "termination", "governing law"):
        assert topic in contract_task
    medical_task = summary_messages(block, MEDICAL)[-1]["content"]
    for topic in ("indication", "dosing", "contraindications", "warnings", "findings"):
        assert topic in medical_task
    opinion_task = summary_messages(block, COURT_OPINION)[-1]["content"]
    for topic in ("the court", "the parties", "question", "outcome", "reasoning"):
        assert topic in opinion_task


def test_rendering_marks_every_page_and_is_deterministic() -> None:
    pages = pages_of("First page text.", "  ", "Third page text.")
    rendered = render_pages(pages)
    assert rendered == "[p. 1]\nFirst page text.\n\n[p. 3]\nThird page text."
    assert render_pages(pages_of("First page text.", "  ", "Third page text.")) == rendered


def test_two_questions_share_the_whole_document_prefix() -> None:
    document = make_document([CONTRACT_TEXT, OPINION_TEXT], kind="legal")
    block = document_block(document.title, render_pages(document.pages))
    first = question_messages(block, "Who are the parties?")
    second = question_messages(document_block("Test", render_pages(document.pages)), "Term?")
    assert first[0] == second[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert first[1]["content"].startswith(block)
    assert second[1]["content"].startswith(block)
    # The summary prompt shares the same prefix, so questions after a summary reuse it too.
    assert summary_messages(block, CONTRACT)[1]["content"].startswith(block)
    # The two prompts differ only in their last words: the question.
    assert first[1]["content"].endswith("Question: Who are the parties?")
    assert first[1]["content"].removesuffix("Who are the parties?") == second[1][
        "content"
    ].removesuffix("Term?")


def test_render_passages_keeps_document_order_merges_neighbours_and_marks_gaps() -> None:
    document = make_document(
        ["Alpha one. Alpha two.\n\nAlpha three.", "Beta one.", "Gamma one.", "Delta one."],
        max_tokens=2,
    )
    by_text = {p.text: p for p in document.passages}
    chosen = [by_text["Delta one."], by_text["Alpha one."], by_text["Alpha two."]]
    rendered = render_passages(document.pages, chosen)
    assert rendered == "[p. 1]\nAlpha one. Alpha two.\n\n[...]\n\n[p. 4]\nDelta one."


def test_render_passages_marks_each_page_of_a_passage_over_a_page_break() -> None:
    document = make_document(["The fee is due", "within 30 days."], max_tokens=20)
    [passage] = document.passages
    assert (passage.first_page, passage.last_page) == (1, 2)
    assert render_passages(document.pages, [passage]) == (
        "[p. 1]\nThe fee is due\n\n[p. 2]\nwithin 30 days."
    )


def test_section_and_combine_prompts_carry_page_labels() -> None:
    section = section_messages(document_block(None, "[p. 4]\nText."), GENERAL, 4, 9)
    assert "pages 4-9" in section[-1]["content"]
    combined = combine_messages("T", GENERAL, [(1, 3, "A."), (4, 4, "B.")])[-1]["content"]
    assert "Pages 1-3: A." in combined and "Page 4: B." in combined


def test_a_legal_document_s_template_follows_its_key_fact_sub_kind() -> None:
    """One guess of contract vs opinion: the summary template and the key-fact schema agree."""
    from pipelines.ingest.classify import guess_subkind
    from tests.pipelines.facts_documents import CONTRACT_PAGES, OPINION_PAGES

    cases = [(CONTRACT_PAGES, "contract", CONTRACT), (OPINION_PAGES, "opinion", COURT_OPINION)]
    for texts, subkind, template in cases:
        pages = pages_of(*texts)
        assert (guess_subkind("legal", pages), choose_template("legal", pages)) == (
            subkind,
            template,
        )
