"""The library page: every document with its facts, filters, search, and delete after a
confirmation that removes pages, passages, summaries, answers and the stored file."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from app.db.models import Answer, Document, DocumentStatus, Page, Passage, Summary
from tests.ui.conftest import all_text, open_page
from tests.ui.seed import add_answer, add_document, add_summary


def titles_shown(at) -> list[str]:
    # Row titles are the bold markdown cells: "**Title**".
    return [
        m.value.strip("*")
        for m in at.main.markdown
        if m.value.startswith("**") and m.value.endswith("**")
    ]


def seed(sessions, files_dir: Path) -> dict[str, int]:
    with sessions() as session:
        lease = add_document(session, files_dir, title="Office Lease", kind="legal")
        label = add_document(session, files_dir, title="Aspirin Label", kind="medical")
        broken = add_document(
            session, files_dir, title="Old Contract", kind="legal", status=DocumentStatus.FAILED
        )
        add_summary(session, lease.id, "The lease runs five years.")
        session.commit()
        return {"lease": lease.id, "label": label.id, "broken": broken.id}


def test_every_document_is_listed_with_its_facts(app_test, ui_settings, sessions) -> None:
    seed(sessions, ui_settings.files_dir)
    at = open_page(app_test(), "views/library.py")
    assert not at.exception
    assert sorted(titles_shown(at)) == ["Aspirin Label", "Office Lease", "Old Contract"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Documents"] == "3" and metrics["Summarized"] == "1"
    assert "3 of 3 matching documents" in all_text(at)
    text = all_text(at)
    assert ":material/check: Yes" in text and ":red-badge[:material/error: Failed]" in text


def test_filters_by_kind_and_status_and_search_by_title(app_test, ui_settings, sessions) -> None:
    seed(sessions, ui_settings.files_dir)
    at = open_page(app_test(), "views/library.py")
    at.selectbox(key="kind").set_value("medical").run()
    assert titles_shown(at) == ["Aspirin Label"]
    at.selectbox(key="kind").set_value("legal").run()
    assert sorted(titles_shown(at)) == ["Office Lease", "Old Contract"]
    at.selectbox(key="status").set_value("failed").run()
    assert titles_shown(at) == ["Old Contract"]
    at.selectbox(key="status").set_value("All").run()
    at.text_input[0].set_value("lease").run()
    assert titles_shown(at) == ["Office Lease"]
    at.text_input[0].set_value("nothing like this").run()
    assert "No documents match these filters." in all_text(at)


def test_delete_asks_first_then_removes_everything_of_the_document(
    app_test, ui_settings, sessions
) -> None:
    ids = seed(sessions, ui_settings.files_dir)
    with sessions() as session:
        lease = session.get(Document, ids["lease"])
        stored = Path(lease.stored_path)
        passage_id = lease.passages[0].id
        add_answer(session, lease.id, "How long?", "Five years [p. 1].", [1], [passage_id])
        session.commit()
    assert stored.is_file()
    at = open_page(app_test(), "views/library.py")

    at.button(key=f"delete-{ids['lease']}").click().run()
    assert "will be removed with its pages, passages, summaries" in all_text(at)
    at.button(key="cancel-delete").click().run()
    with sessions() as session:
        assert session.get(Document, ids["lease"]) is not None  # cancel keeps it

    at.button(key=f"delete-{ids['lease']}").click().run()
    at.button(key="confirm-delete").click().run()
    assert not at.exception
    assert "Deleted “Office Lease”." in all_text(at)
    assert "Office Lease" not in titles_shown(at)
    with sessions() as session:
        assert session.get(Document, ids["lease"]) is None
        for model in (Page, Passage, Summary, Answer):
            count = session.scalar(
                select(func.count()).select_from(model).where(model.document_id == ids["lease"])
            )
            assert count == 0, model.__name__
        assert session.scalar(select(func.count()).select_from(Document)) == 2
    assert not stored.exists()
