"""The three support states shown the same way everywhere: answers stored through app/services,
then the document page and the collection page (AppTest), `longdoc ask`'s printing and the JSON
record all show the words of one formatter (app.services.answer_labels.answer_view): the
state's label and note, what a partly supported answer lacks, and for a not supported one the
quote as the answer with the model's own text set apart."""

from __future__ import annotations

import io
import json

from rich.console import Console

from app.services import collection_answers, collections, results
from app.services.answer_labels import (
    MODEL_TEXT_TITLE,
    NOT_SUPPORTED,
    PARTLY_SUPPORTED,
    SUPPORTED,
    view_of,
)
from tests.ui.conftest import all_text, open_page
from tests.ui.seed import PAGE_SEPARATOR, add_answer, add_document
from worker.cli.collections import print_collection_answer
from worker.cli.output import print_answer

PAGES = [
    "Lease between Acme and Beta. The rent is 900 dollars a month.",
    "Either party may end the lease with three months notice. Notice must be written.",
    "This lease is governed by the laws of Ohio. Disputes go to the courts of Ohio.",
]
MISSING = "Partly supported: it does not say whether the lease renews."
MODEL_TEXT = "The Supreme Court of Nevada hears them."
QUOTED = '"Disputes go to the courts of Ohio." (quoted from p. 3)'


def _quote(page: int, sentence: str) -> dict:
    offset = sum(len(text) + len(PAGE_SEPARATOR) for text in PAGES[: page - 1])
    start = offset + PAGES[page - 1].index(sentence)
    return {"text": sentence, "page": page, "start_char": start,
            "end_char": start + len(sentence), "passage_ordinal": 0, "score": 1.0}  # fmt: skip


def _seed_answers(session, document_id: int) -> None:
    law = _quote(3, "This lease is governed by the laws of Ohio.")
    add_answer(session, document_id, "Which law governs?", "Ohio law governs [p. 3].", [3], [],
               quotes=[law], support="supported")  # fmt: skip
    notice = _quote(2, "Either party may end the lease with three months notice.")
    add_answer(
        session, document_id, "When does the lease end, and does it renew?",
        "Either party may end it with three months notice [p. 2].", [2], [],
        quotes=[notice], support="partly_supported", stats={"support_missing": MISSING},
    )  # fmt: skip
    add_answer(
        session, document_id, "Which court hears disputes?", QUOTED, [3], [],
        quotes=[_quote(3, "Disputes go to the courts of Ohio.")], support="unsupported",
        model_answer=MODEL_TEXT, unsupported_claims=["Supreme Court of Nevada"],
    )  # fmt: skip


def _plain(text: str) -> str:
    """One line, Markdown escapes undone: as a person reads it."""
    return " ".join(text.replace("\\", "").split())


def _printed(print_one, answer) -> str:
    out = io.StringIO()
    print_one(Console(file=out, width=300), answer)
    return " ".join(out.getvalue().split())


def test_a_documents_three_answers_read_the_same_on_the_page_in_the_cli_and_as_json(
    app_test, ui_settings, sessions
) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        _seed_answers(session, document.id)
        session.commit()
        stored = sorted(results.list_answers(session=session, document_id=document.id),
                        key=lambda a: a.id)  # fmt: skip
    views = [view_of(answer) for answer in stored]
    assert [view.state for view in views] == [SUPPORTED, PARTLY_SUPPORTED, NOT_SUPPORTED]

    at = open_page(app_test(), "views/document.py", doc=str(document.id))
    assert not at.exception
    page = _plain(all_text(at))
    badges = [_plain(m.value) for m in at.markdown if "-badge[" in m.value]
    assert len(badges) == 3
    for view, answer, badge, colour in zip(views, stored, badges, ("green", "orange", "red"),
                                           strict=True):  # fmt: skip
        assert badge.startswith(f":{colour}-badge[") and badge.endswith(f" {view.label}]")
        assert view.note in page  # the same sentence under the mark ...
        assert f"{view.label}. {view.note}" in _printed(print_answer, answer)  # ... and in the CLI
    assert views[1].missing == MISSING and MISSING in page

    # Not supported: the quote is the answer; the model's text only set apart, after it.
    unsupported = views[2]
    assert (unsupported.text, unsupported.quoted_from_pages) == (QUOTED, (3,))
    (apart,) = at.expander
    assert apart.label == MODEL_TEXT_TITLE and _plain(apart.markdown[0].value) == MODEL_TEXT
    assert page.index(_plain(QUOTED)) < page.index(MODEL_TEXT)
    printed = _printed(print_answer, stored[2])
    assert printed.startswith(QUOTED) and f"{MODEL_TEXT_TITLE}: {MODEL_TEXT}" in printed
    assert MODEL_TEXT_TITLE not in _printed(print_answer, stored[0])

    records = json.loads(json.dumps([view.record() for view in views]))
    assert [r["support"] for r in records] == ["supported", "partly_supported", "not_supported"]
    assert [r["support_label"] for r in records] == [view.label for view in views]
    assert [r["missing"] for r in records] == [None, MISSING, None]
    assert [r["model_answer_set_apart"] for r in records] == [None, None, MODEL_TEXT]
    assert records[2]["answer"] == QUOTED and records[2]["quoted_from_pages"] == [3]


def test_a_collections_not_supported_answer_sets_the_models_text_apart(
    app_test, ui_settings, sessions
) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Office Lease", pages=PAGES)
        matter = collections.create_collection(session=session, name="Matter")
        collections.add_documents(
            session=session, collection_id=matter.id, document_ids=[document.id]
        )
        job = collection_answers.create_question_job(
            session=session, collection_id=matter.id, question="Which court hears disputes?"
        )
        job.status = "succeeded"
        quote = _quote(3, "Disputes go to the courts of Ohio.")
        stored = collection_answers.save(
            session=session,
            job_id=job.id,
            collection_id=matter.id,
            question="Which court hears disputes?",
            mode="retrieval",
            answer='"Disputes go to the courts of Ohio." (quoted from [Office Lease, p. 3])',
            citations=[{"document_id": document.id, "title": "Office Lease", "page": 3}],
            quotes=[{"document_id": document.id, "title": "Office Lease", **quote}],
            rows=[],
            support="unsupported",
            model="m",
            stats={"model_answer": MODEL_TEXT, "support_reason": "It names another court."},
        )
        session.commit()
    view = view_of(stored)
    assert (view.state, view.quoted_from_pages, view.model_text) == (
        NOT_SUPPORTED,
        (3,),
        MODEL_TEXT,
    )

    at = open_page(app_test(), "views/collections.py", collection=str(matter.id))
    assert not at.exception
    page = _plain(all_text(at))
    (badge,) = [_plain(m.value) for m in at.markdown if "-badge[" in m.value]
    assert badge.startswith(":red-badge[") and badge.endswith(f" {view.label}]")
    assert view.note in page and "It names another court." in page
    (apart,) = [e for e in at.expander if e.label == MODEL_TEXT_TITLE]  # besides "Documents"
    assert apart.label == MODEL_TEXT_TITLE and _plain(apart.markdown[0].value) == MODEL_TEXT
    assert page.index("(quoted from [Office Lease, p. 3])") < page.index(MODEL_TEXT)

    printed = _printed(print_collection_answer, stored)
    assert printed.startswith(view.text) and f"{view.label}. {view.note}" in printed
    assert f"{MODEL_TEXT_TITLE}: {MODEL_TEXT}" in printed
