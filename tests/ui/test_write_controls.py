"""Write controls are offered only to whom may use them (accounts, issue 25): every role x page x
control cell, generated from the grants below, checked shown or not shown (AppTest, as the other
UI tests). The services still refuse a write from anyone else (tests/ui/test_accounts_ui.py,
tests/app/test_access.py); this is what a person is offered.

The world of tests/app/access_world.py, plus "Matter C" (document "Cedar Deed") that the editor
and the viewer may both only read: an editor sees no write control of a collection they read
only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from app.db.models import CollectionGrant, Role, utc_now
from app.services import collections
from tests.app.access_world import ROLES, build_world
from tests.app.library_rows import FILLER, store
from tests.ui.conftest import all_text, open_page

# Who may write what, as the issue states the rules: an admin everything; an editor uploads,
# creates collections, and writes what they own and the collections granted to them for
# writing; a viewer nothing. "A" and "C" are collections; "own" the editor's own document.
WRITE_GRANTS: dict[Role, frozenset[str]] = {
    Role.ADMIN: frozenset({"A", "C", "own", "upload", "create"}),
    Role.EDITOR: frozenset({"A", "own", "upload", "create"}),
    Role.VIEWER: frozenset(),
}


@dataclass(frozen=True)
class Place:
    """A page as one user opens it, and what its write controls act on."""

    page: str
    query: tuple[tuple[str, str], ...]  # (parameter, a world attribute naming the id)
    marker: str  # text every reader of the page sees, so an empty page cannot pass
    controls: tuple[tuple[str, str], ...]  # (widget key, what it writes: a WRITE_GRANTS word)


PLACES: dict[str, Place] = {
    "library": Place(
        "views/library.py",
        (),
        "Orchard Lease",
        (("delete-{a}", "A"), ("delete-{c}", "C")),
    ),
    "document in A": Place(
        "views/document.py",
        (("doc", "a"),),
        "Orchard Lease",
        (("summarize", "A"), ("extract-facts", "A")),
    ),
    "document in C": Place(
        "views/document.py",
        (("doc", "c"),),
        "Cedar Deed",
        (("summarize", "C"), ("extract-facts", "C")),
    ),
    "upload": Place("views/upload.py", (), "Upload", (("upload-submit", "upload"),)),
    "collection A": Place(
        "views/collections.py",
        (("collection", "collection_a"),),
        "Collections",
        (
            ("create-collection", "create"),
            ("remove-{a}", "A"),
            ("add-documents", "A"),
            ("rename-collection", "A"),
            ("delete-collection", "A"),
        ),
    ),
    "collection C": Place(
        "views/collections.py",
        (("collection", "collection_c"),),
        "Collections",
        (
            ("create-collection", "create"),
            ("remove-{c}", "C"),
            ("add-documents", "C"),
            ("rename-collection", "C"),
            ("delete-collection", "C"),
        ),
    ),
}
# Every page here is readable by every role, so each cell checks a page its user sees.
CELLS = list(itertools.product(ROLES, PLACES))


@dataclass(frozen=True)
class Ids:
    a: int
    c: int
    collection_a: int
    collection_c: int
    user_ids: dict[Role, int]


@pytest.fixture
def ids(sessions) -> Ids:
    with sessions() as session:
        world = build_world(session)
        c = store(session, "Cedar Deed", [FILLER, "The cedar stays where it stands."]).id
        matter_c = collections.create_collection(session=session, name="Matter C")
        session.flush()
        collections.add_documents(session=session, collection_id=matter_c.id, document_ids=[c])
        for role in (Role.EDITOR, Role.VIEWER):
            session.add(
                CollectionGrant(
                    user_id=world.user_ids[role], collection_id=matter_c.id, can_write=False
                )
            )
        session.commit()
        return Ids(world.a, c, world.collection_a, matter_c.id, world.user_ids)


def _open(app_test, ids: Ids, role: Role, place: Place):
    at = app_test()
    at.session_state["signed_in_user_id"] = ids.user_ids[role]
    at.session_state["signed_in_at"] = utc_now()
    return open_page(
        at, place.page, **{name: str(getattr(ids, attr)) for name, attr in place.query}
    )


def _shown_keys(at) -> set[str]:
    return {button.key for button in at.button if button.key}


@pytest.mark.parametrize(("role", "place"), CELLS, ids=[f"{r.value}-{p}" for r, p in CELLS])
def test_a_write_control_is_shown_only_to_whom_may_use_it(app_test, ids, role, place) -> None:
    at = _open(app_test, ids, role, PLACES[place])
    assert not at.exception and not at.error, all_text(at)
    assert PLACES[place].marker in all_text(at)
    controls = {key.format(a=ids.a, c=ids.c): needs for key, needs in PLACES[place].controls}
    expected = {key for key, needs in controls.items() if needs in WRITE_GRANTS[role]}
    # Each control of the page, shown or not: the buttons drawn that are write controls.
    assert _shown_keys(at) & set(controls) == expected


def test_a_viewer_is_told_why_there_is_no_upload_form(app_test, ids) -> None:
    at = _open(app_test, ids, Role.VIEWER, PLACES["upload"])
    assert "may read and ask but not upload" in all_text(at)
    assert not at.get("file_uploader")


def test_only_a_session_whose_user_may_upload_passes_the_upload_gate() -> None:
    from ui import signed_in, upload_gate

    signed_in.add("viewer-session", may_upload=False)
    signed_in.add("editor-session", may_upload=True)
    try:
        assert not upload_gate.may_upload("viewer-session")
        assert upload_gate.may_upload("editor-session")
        assert not upload_gate.may_upload("nobody")
    finally:
        signed_in.remove("viewer-session")
        signed_in.remove("editor-session")
