"""The document page shows key passages before the model's summary, and under each answer its
support label and the quotes it rests on; a quote's page button opens the page with exactly
that sentence marked."""

from __future__ import annotations

from tests.ui.conftest import all_text, open_page
from tests.ui.seed import PAGE_SEPARATOR, add_answer, add_document, add_summary

PAGES = [
    "Lease between Acme and Beta. The rent is 900 dollars a month.",
    "Either party may end the lease with three months notice. Notice must be written.",
    "This lease is governed by the laws of Ohio. Disputes go to the courts of Ohio.",
]


def _quote(page: int, sentence: str, score: float = 1.0) -> dict:
    offset = sum(len(text) + len(PAGE_SEPARATOR) for text in PAGES[: page - 1])
    start = offset + PAGES[page - 1].index(sentence)
    return {
        "text": sentence,
        "page": page,
        "start_char": start,
        "end_char": start + len(sentence),
        "passage_ordinal": 0,
        "score": score,
    }


LAW = _quote(3, "This lease is governed by the laws of Ohio.")
RENT = _quote(1, "The rent is 900 dollars a month.")


def _seed(sessions, files_dir, **answer) -> int:
    with sessions() as session:
        document = add_document(session, files_dir, title="Office Lease", pages=PAGES)
        add_summary(
            session,
            document.id,
            "Acme leases an office to Beta for 900 dollars a month.",
            key_passages=[RENT, _quote(2, "Notice must be written."), LAW],
        )
        if answer:
            add_answer(
                session, document.id, "Which law governs?", answer.pop("text"), [3], [], **answer
            )
        session.commit()
        return document.id


def _open(app_test, document_id: int):
    at = open_page(app_test(), "views/document.py", doc=str(document_id))
    assert not at.exception
    return at


def _text(at) -> str:
    """The page's text (markdown in the order shown, then captions), Markdown escapes undone."""
    return all_text(at).replace("\\", "")


def _marked(at) -> str:
    (page,) = [m.value for m in at.markdown if "longdoc-page" in m.value and "<mark" in m.value]
    return page.split("<mark", 1)[1].split(">", 1)[1].split("</mark>", 1)[0]


def test_key_passages_come_first_and_open_their_page(app_test, ui_settings, sessions) -> None:
    document_id = _seed(sessions, ui_settings.files_dir)
    at = _open(app_test, document_id)
    text = _text(at)
    order = [
        text.index("Key passages"),
        text.index("The rent is 900 dollars a month."),
        text.index("This lease is governed by the laws of Ohio."),
        text.index("Summary by the model"),
        text.index("Acme leases an office to Beta"),
    ]
    assert order == sorted(order)

    summary_id = next(b.key for b in at.button if b.key and b.key.startswith("key-")).split("-")[1]
    assert at.button(key=f"key-{summary_id}-2").label == "p. 3"
    at.button(key=f"key-{summary_id}-2").click().run()
    assert not at.exception
    assert _marked(at) == "This lease is governed by the laws of Ohio."
    assert "Highlighted: the quoted sentence" in all_text(at)


def test_an_unsupported_answer_shows_its_label_quotes_and_the_models_text(
    app_test, ui_settings, sessions
) -> None:
    document_id = _seed(
        sessions,
        ui_settings.files_dir,
        text='"This lease is governed by the laws of Ohio." (quoted from p. 3)',
        quotes=[LAW, RENT],
        support="unsupported",
        model_answer="Nevada law governs this lease.",
        unsupported_claims=["Nevada"],
    )
    at = _open(app_test, document_id)
    text = _text(at)
    assert "Not supported by the quoted text" in text
    assert 'stated "Nevada", which the document does not contain' in text
    assert "(quoted from p. 3)" in text
    assert "Nevada law governs this lease." in text  # in the expander

    quote_buttons = [b for b in at.button if b.key and b.key.startswith("quote-")]
    assert [b.label for b in quote_buttons] == ["p. 3", "p. 1"]
    quote_buttons[1].click().run()
    assert not at.exception
    assert _marked(at) == "The rent is 900 dollars a month."


def test_a_supported_answer_says_so_and_an_old_answer_shows_no_label(
    app_test, ui_settings, sessions
) -> None:
    document_id = _seed(
        sessions,
        ui_settings.files_dir,
        text="Ohio law governs [p. 3].",
        quotes=[LAW],
        support="supported",
    )
    with sessions() as session:
        add_answer(session, document_id, "What is the rent?", "900 dollars [p. 1].", [1], [])
        session.commit()
    at = _open(app_test, document_id)
    text = _text(at)
    assert text.count("Supported by the quoted text") == 1
    assert "saved before answers were checked" not in text
    assert len([b for b in at.button if b.key and b.key.startswith("quote-")]) == 1


def test_each_summary_sentence_shows_its_page_and_unsupported_ones_are_set_apart(
    app_test, ui_settings, sessions
) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        add_summary(
            session,
            document.id,
            "The lease is governed by Ohio law. Nevada courts hear disputes. Rent is paid in gold.",
            sentence_support=[
                {"text": "The lease is governed by Ohio law.", "status": "supported",
                 "quotes": [LAW], "missing": []},
                {"text": "Nevada courts hear disputes.", "status": "unsupported",
                 "quotes": [], "missing": ["Nevada"]},
                {"text": "Rent is paid in gold.", "status": "no_evidence", "quotes": [RENT],
                 "missing": []},
            ],
        )  # fmt: skip
        session.commit()
        document_id = document.id
    at = _open(app_test, document_id)
    text = _text(at)
    assert "The lease is governed by Ohio law. (p. 3)" in text
    assert "1 of 3 sentences rest on a quoted passage of the document" in text
    assert "Set apart: not supported by the document" in text
    assert ':red[Nevada courts hear disputes.] · not in the document: "Nevada"' in text
    assert ":gray[Rent is paid in gold.] · no passage of the document states this" in text
    (button,) = [b for b in at.button if b.key and b.key.startswith("sentence-")]
    assert button.label == "p. 3"
    button.click().run()
    assert not at.exception
    assert _marked(at) == "This lease is governed by the laws of Ohio."


def test_the_summary_leads_with_its_key_facts_each_with_its_page(
    app_test, ui_settings, sessions
) -> None:
    parties = _quote(1, "Lease between Acme and Beta.")
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        add_summary(
            session,
            document.id,
            "The rent is 900 dollars a month.",
            sentence_support=[
                {"text": "The rent is 900 dollars a month.", "status": "supported",
                 "quotes": [RENT], "missing": []},
            ],
            lead=[
                {"text": "Parties: Acme; Beta.", "status": "supported", "quotes": [parties]},
                {"text": "Governing law: Ohio.", "status": "supported", "quotes": [LAW]},
            ],
        )  # fmt: skip
        session.commit()
        document_id = document.id
    at = _open(app_test, document_id)
    text = _text(at)
    assert "From the key facts, each quoted from the document" in text
    lead = text.index("Parties: Acme; Beta. (p. 1)")
    assert (
        lead
        < text.index("Governing law: Ohio. (p. 3)")
        < text.index("The rent is 900 dollars a month. (p. 1)")
    )
    # The lead counts apart from the model's sentences, and its quotes open their pages.
    assert "Every sentence (1) rests on a quoted passage of the document." in text
    buttons = [b for b in at.button if b.key and b.key.startswith("sentence-")]
    assert [b.label for b in buttons] == ["p. 1", "p. 3", "p. 1"]
    buttons[1].click().run()
    assert not at.exception
    assert _marked(at) == "This lease is governed by the laws of Ohio."


def test_a_checked_summary_with_no_statement_says_so_instead_of_its_fragments(
    app_test, ui_settings, sessions
) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        # What the model wrote was a signature block: checked, and no sentence in it.
        add_summary(
            session,
            document.id,
            "ACME HOLDINGS LLC\nBy:\nName:",
            stats={"num_summary_sentences": 0},
        )
        old = add_document(session, ui_settings.files_dir, title="Old Lease", pages=PAGES)
        add_summary(session, old.id, "Written before summaries were checked.")  # no counts
        session.commit()
        document_id, old_id = document.id, old.id
    text = _text(_open(app_test, document_id))
    assert "states nothing that can be checked against the document" in text
    assert "ACME HOLDINGS" not in text
    assert "Written before summaries were checked." in _text(_open(app_test, old_id))


def test_a_summary_that_only_repeated_its_prompt_keeps_its_lead_and_says_so(
    app_test, ui_settings, sessions
) -> None:
    parties = _quote(1, "Lease between Acme and Beta.")
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        # Every sentence the model wrote was its own instructions: dropped, none to check.
        add_summary(
            session,
            document.id,
            "",
            stats={"num_summary_sentences": 0, "num_prompt_sentences_dropped": 5},
            key_passages=[RENT, LAW],
            lead=[{"text": "Parties: Acme; Beta.", "status": "supported", "quotes": [parties]}],
        )
        session.commit()
        document_id = document.id
    text = _text(_open(app_test, document_id))
    assert "Parties: Acme; Beta. (p. 1)" in text
    assert "The rent is 900 dollars a month." in text  # a key passage
    assert (
        "it repeated its own instructions, which are left out, and wrote no full sentence "
        "about the document. The key facts and key passages above are quoted from the document "
        "itself."
    ) in text


def test_a_summary_with_no_supported_sentence_says_so_plainly(
    app_test, ui_settings, sessions
) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        add_summary(
            session,
            document.id,
            "Rent is paid in gold.",
            stats={"num_summary_sentences": 1},
            sentence_support=[
                {"text": "Rent is paid in gold.", "status": "no_evidence", "quotes": [],
                 "missing": []},
            ],
            key_passages=[RENT],
        )  # fmt: skip
        session.commit()
        document_id = document.id
    text = _text(_open(app_test, document_id))
    assert (
        "No sentence of the model's summary rests on a passage of the document; each is set "
        "apart below with the reason. The key passages above are quoted from the document itself."
    ) in text
    assert ":gray[Rent is paid in gold.] · no passage of the document states this" in text


def test_the_three_support_states_each_show_their_label_and_what_is_missing(
    app_test, ui_settings, sessions
) -> None:
    notice = _quote(2, "Either party may end the lease with three months notice.")
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        add_answer(
            session,
            document.id,
            "Which law governs?",
            "Ohio law governs [p. 3].",
            [3],
            [],
            quotes=[LAW],
            support="supported",
        )
        add_answer(
            session,
            document.id,
            "When does the lease end, and does it renew?",
            "Either party may end it with three months notice [p. 2].",
            [2],
            [],
            quotes=[notice],
            support="partly_supported",
            stats={"support_missing": "Partly supported: it does not say whether it renews."},
        )
        add_answer(
            session,
            document.id,
            "Which court hears disputes?",
            '"Disputes go to the courts of Ohio." (quoted from p. 3)',
            [3],
            [],
            quotes=[_quote(3, "Disputes go to the courts of Ohio.")],
            support="unsupported",
            model_answer="The Supreme Court of Nevada hears them.",
            unsupported_claims=["Supreme Court of Nevada"],
        )
        session.commit()
        document_id = document.id
    at = _open(app_test, document_id)
    text = _text(at)
    badges = [m.value for m in at.markdown if "-badge[" in m.value]
    assert len(badges) == 3
    assert ":green-badge[" in badges[0] and "Supported by the quoted text" in badges[0]
    assert ":orange-badge[" in badges[1] and "Partly supported by the quoted text" in badges[1]
    assert ":red-badge[" in badges[2] and "Not supported by the quoted text" in badges[2]
    assert "it does not say whether it renews" in text
    assert 'stated "Supreme Court of Nevada", which the document does not contain' in text
    # The model's unsupported text is only set apart, in the expander, after the quote.
    assert text.index("(quoted from p. 3)") < text.index("The Supreme Court of Nevada hears them.")
