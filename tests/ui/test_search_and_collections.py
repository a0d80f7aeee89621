"""The search page (snippets with matched words, filters, the page opened with the passage
marked) and the collections page (create, add, the question queued to the broker, an answer
whose citations name document and page, the per-document table), under AppTest."""

from __future__ import annotations

import json

from sqlalchemy import select

from app.db.models import CollectionAnswer, Job, Role, User, utc_now
from app.services import collection_answers, collections
from tests.ui.conftest import all_text, broker_messages, open_page
from tests.ui.seed import add_document
from tests.ui.test_upload import lease_pdf, upload

LEASE = [
    "Lease between Acme and Beta. The rent is 900 dollars a month.",
    "Neither party may assign this lease without the written consent of the other.",
]
SUPPLY = ["The supplier delivers widgets. Payment is due in thirty days."]


def _seed(sessions, files_dir) -> tuple[int, int]:
    with sessions() as session:
        lease = add_document(session, files_dir, title="Office Lease", pages=LEASE).id
        supply = add_document(session, files_dir, title="Supply Agreement", pages=SUPPLY).id
        session.commit()
    return lease, supply


def test_search_shows_document_page_and_marked_words(app_test, ui_settings, sessions) -> None:
    _seed(sessions, ui_settings.files_dir)
    at = open_page(app_test(), "views/search.py")
    at.text_input(key="search-query").input("assigned consent").run()
    assert not at.exception
    text = all_text(at)
    assert "**1. Office Lease**, p. 2" in text
    # Matched words bold, and the words around them still apart from them.
    assert "may **assign** this lease" in text and "written **consent** of" in text
    assert "1 passage, best match first." in text
    at.button(
        key=next(b.key for b in at.button if b.key and b.key.startswith("hit-"))
    ).click().run()
    assert not at.exception
    assert "Page 2" in all_text(at)  # the dialog with the page
    assert "Highlighted: the passage that matched the search." in all_text(at)
    at.selectbox(key="search-kind").set_value(at.selectbox(key="search-kind").options[1]).run()
    assert "No passage matches." in all_text(at)


def test_collections_create_add_and_ask(app_test, ui_settings, sessions) -> None:
    lease, supply = _seed(sessions, ui_settings.files_dir)
    at = open_page(app_test(), "views/collections.py")
    assert "Choose a collection, or create one." in all_text(at)
    at.text_input(key="new-collection-name").input("Matter 7")
    at.button(key="create-collection").click().run()  # the popover's form
    assert not at.exception
    with sessions() as session:
        matter = collections.find_collection(session=session, name="Matter 7")
        assert matter is not None
    assert at.selectbox(key="collection-choice").value == matter.id  # shown, chosen
    at.multiselect(key=f"add-{matter.id}").set_value([lease, supply])
    at.button(key="add-documents").click().run()
    with sessions() as session:
        assert collections.document_ids_of(session=session, collection_id=matter.id) == [
            lease,
            supply,
        ]
    at.text_area(key="collection-question").input("Can the lease be assigned?")
    at.button[-1].click()  # the form's submit button
    at.run()
    assert not at.exception
    with sessions() as session:
        job = session.scalars(select(Job)).one()
        assert job.collection_id == matter.id and job.document_id is None
        assert job.params == {"question": "Can the lease be assigned?", "collection_id": matter.id}
    (message,) = broker_messages(ui_settings, "gpu")
    assert message["task"] == "longdoc.answer" and message["args"] == [job.id]


def test_rename_keeps_the_collection_chosen_and_bad_names_get_a_sentence(
    app_test, sessions
) -> None:
    with sessions() as session:
        matter = collections.create_collection(session=session, name="Matter")
        collections.create_collection(session=session, name="Other")
        session.commit()
    at = open_page(app_test(), "views/collections.py", collection=str(matter.id))
    assert at.selectbox(key="collection-choice").value == matter.id
    at.text_input(key="rename-collection-name").input("Matter 8")
    at.button(key="rename-collection").click().run()
    assert not at.exception
    assert at.selectbox(key="collection-choice").value == matter.id
    assert at.selectbox(key="collection-choice").options == ["Matter 8", "Other"]
    at.text_input(key="new-collection-name").input("Other")
    at.button(key="create-collection").click().run()
    assert "There is already a collection named 'Other'." in [e.value for e in at.error]
    assert at.selectbox(key="collection-choice").value == matter.id


def test_a_collection_answer_cites_documents_and_shows_the_table(
    app_test, ui_settings, sessions
) -> None:
    lease, _ = _seed(sessions, ui_settings.files_dir)
    with sessions() as session:
        matter = collections.create_collection(session=session, name="Matter")
        collections.add_documents(session=session, collection_id=matter.id, document_ids=[lease])
        job = collection_answers.create_question_job(
            session=session, collection_id=matter.id, question="Assignable?"
        )
        retrieval = collection_answers.save(
            session=session,
            job_id=job.id,
            collection_id=matter.id,
            question="Assignable?",
            mode="retrieval",
            answer="Only with consent [Office Lease, p. 2].",
            citations=[{"document_id": lease, "title": "Office Lease", "page": 2}],
            quotes=[
                {
                    "document_id": lease,
                    "title": "Office Lease",
                    "text": LEASE[1],
                    "page": 2,
                    "start_char": len(LEASE[0]) + 2,
                    "end_char": len(LEASE[0]) + 2 + len(LEASE[1]),
                    "passage_ordinal": 2,
                    "score": 1.0,
                }
            ],
            rows=[],
            support="supported",
            model="m",
        )
        job.status = "succeeded"
        table_job = collection_answers.create_question_job(
            session=session, collection_id=matter.id, question="Which leases allow assignment?"
        )
        table_job.status = "succeeded"
        collection_answers.save(
            session=session,
            job_id=table_job.id,
            collection_id=matter.id,
            question="Which leases allow assignment?",
            mode="per_document",
            answer="Answered document by document: 1 of 1 documents.",
            citations=[{"document_id": lease, "title": "Office Lease", "page": 2}],
            quotes=[],
            rows=[
                {
                    "document_id": lease,
                    "title": "Office Lease",
                    "answer": "Only with written consent.",
                    "quote": LEASE[1],
                    "page": 2,
                    "source": "model",
                    "support": "unchecked",
                }
            ],
            support=None,
            model="m",
        )
        session.commit()
        retrieval_id = retrieval.id
        assert len(session.scalars(select(CollectionAnswer)).all()) == 2
    at = open_page(app_test(), "views/collections.py", collection=str(matter.id))
    assert not at.exception
    text = all_text(at)
    assert "Only with consent \\[Office Lease, p\\. 2\\]\\." in text
    assert "Supported by the quoted text" in text
    (table,) = at.dataframe
    assert list(table.value["Document"]) == ["Office Lease"]
    assert list(table.value["Page"]) == [2]
    # Every column is drawn, each with a width, and together they fit a wide page's chat
    # message: the quote and the page are not pushed out at the right.
    assert list(table.proto.column_order) == ["Document", "Page", "Answer", "Quote", "From"]
    columns = json.loads(table.proto.columns)
    widths = {name: config["width"] for name, config in columns.items() if name != "_index"}
    assert set(widths) == {"Document", "Page", "Answer", "Quote", "From"}
    assert all(isinstance(w, int) for w in widths.values()) and sum(widths.values()) <= 1000
    labels = [b.label for b in at.button]
    assert "Office Lease, p. 2" in labels
    at.button(key=f"cite-{retrieval_id}-0").click().run()
    assert not at.exception
    assert "Page 2" in all_text(at)
    assert "<mark" in all_text(at)  # the quoted sentence marked on its page


def test_an_upload_goes_into_the_chosen_collection(app_test, ui_settings, sessions, tmp_path):
    with sessions() as session:
        matter = collections.create_collection(session=session, name="Matter")
        session.commit()
    data = lease_pdf(tmp_path)
    at = open_page(app_test(), "views/upload.py")
    at.selectbox(key="upload-collection").set_value(matter.id)
    upload(at, [("lease.pdf", data)])
    assert not at.exception
    with sessions() as session:
        job = session.scalars(select(Job)).one()
    assert job.params["collection_id"] == matter.id  # joins it once stored (worker/jobs/runner.py)


def test_the_new_collection_popover_closes_after_create(app_test, ui_settings, sessions) -> None:
    at = open_page(app_test(), "views/collections.py")
    at.session_state["new-collection-popover"] = True  # the person opened it
    at.run()
    assert new_collection_popover(at).open
    at.text_input(key="new-collection-name").input("Matter 8")
    at.button(key="create-collection").click().run()
    assert not at.exception
    assert at.session_state["new-collection-popover"] is False
    assert not new_collection_popover(at).open
    with sessions() as session:
        assert collections.find_collection(session=session, name="Matter 8") is not None


def new_collection_popover(at):
    """The popover's proto (label, open) of the page's New-collection popover."""
    (popover,) = [
        b.proto.popover for b in at.get("popover") if b.proto.popover.label == "New collection"
    ]
    return popover


def _signed_in_admin(app_test, admin_id: int):
    """An AppTest whose session signed in as the admin a moment ago (tests/ui/test_accounts_ui)."""
    at = app_test()
    at.session_state["signed_in_user_id"] = admin_id
    at.session_state["signed_in_at"] = utc_now()
    return at


def test_collections_of_one_name_are_told_apart_by_owner_and_id(app_test, sessions) -> None:
    """Names are unique per owner: the pickers of an admin, who sees two owners' "Matter X",
    show each with its owner and id."""
    with sessions() as session:
        admin = User(name="ada", role=Role.ADMIN, password_hash="x")
        owners = [User(name=name, role=Role.EDITOR, password_hash="x") for name in ("al", "bo")]
        session.add_all([admin, *owners])
        session.flush()
        hers, his = (  # neither may read the other's
            collections.create_collection(
                session=session, name="Matter X", owner_id=owner.id, readable=set()
            )
            for owner in owners
        )
        other = collections.create_collection(session=session, name="Other")
        session.commit()
    labels = [f"Matter X (al's, #{hers.id})", f"Matter X (bo's, #{his.id})", "Other"]
    at = open_page(
        _signed_in_admin(app_test, admin.id), "views/collections.py", collection=str(his.id)
    )
    assert not at.exception
    picker = at.selectbox(key="collection-choice")
    assert picker.value == his.id and picker.options == labels
    picker.set_value(other.id).run()
    assert not at.exception and at.selectbox(key="collection-choice").value == other.id
    search = open_page(_signed_in_admin(app_test, admin.id), "views/search.py")
    assert search.selectbox(key="search-collection").options == labels
