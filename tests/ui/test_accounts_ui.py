"""The access rules through the UI (AppTest, as tests/ui do): sign-in by user name and password,
every role x page cell allowed or refused (generated from the rules below), a document opened by
changing the page's ?doc= refused and logged, search and the library without B, sign-out, and a
session ended by disabling its user."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from app.db.models import Role, utc_now
from app.services import accounts, audit
from app.services.access import local_admin
from tests.app.access_world import NAMES, ONLY_IN_B, PASSWORD, ROLES, World, build_world
from tests.ui.conftest import all_text, open_page

ALL = frozenset(ROLES)
WRITERS = frozenset({Role.ADMIN, Role.EDITOR})
ADMIN = frozenset({Role.ADMIN})
REFUSED = "that you may open"


@pytest.fixture
def world(sessions) -> World:
    with sessions() as session:
        return build_world(session)


def _signed_in(app_test, world: World, role: Role):
    """An AppTest whose session signed in as `role`'s user a moment ago (as the form leaves it)."""
    at = app_test()
    at.session_state["signed_in_user_id"] = world.user_ids[role]
    at.session_state["signed_in_at"] = utc_now()
    return at


# page cell -> (open it and return the page's text, the roles that see it, what they see)
Cell = Callable[..., str]
PAGES: dict[str, tuple[Cell, frozenset[Role], str]] = {
    "document in A": (
        lambda at, w: all_text(open_page(at, "views/document.py", doc=str(w.a))),
        ALL,
        "Orchard Lease",
    ),
    "document in B": (
        lambda at, w: all_text(open_page(at, "views/document.py", doc=str(w.b))),
        ADMIN,
        "Zeppelin Merger",
    ),
    "editor's own document": (
        lambda at, w: all_text(open_page(at, "views/document.py", doc=str(w.own))),
        WRITERS,
        "Editor Notes",
    ),
    "document in no collection": (
        lambda at, w: all_text(open_page(at, "views/document.py", doc=str(w.loose))),
        ADMIN,
        "Loose Memo",
    ),
}
CELLS = list(itertools.product(ROLES, PAGES))


@pytest.mark.parametrize(("role", "page"), CELLS, ids=[f"{r.value}-{p}" for r, p in CELLS])
def test_every_role_and_page(app_test, sessions, world, role, page) -> None:
    open_it, allowed, shown = PAGES[page]
    text = open_it(_signed_in(app_test, world, role), world)
    with sessions() as session:
        refused = audit.list_events(session=session, outcome=audit.REFUSED)
    if role in allowed:
        assert shown in text and REFUSED not in text
        assert not refused
    else:
        assert shown not in text and REFUSED in text
        (event,) = refused
        assert event.user_name == NAMES[role] and event.origin.startswith("ui ")


def test_a_viewer_searches_and_lists_only_what_is_granted(app_test, sessions, world) -> None:
    at = open_page(_signed_in(app_test, world, Role.VIEWER), "views/search.py")
    at.text_input(key="search-query").input(ONLY_IN_B).run()
    assert not at.exception
    assert "No passage matches." in all_text(at) and "Zeppelin" not in all_text(at)
    at = open_page(_signed_in(app_test, world, Role.VIEWER), "views/library.py")
    shown = " ".join(str(item.value) for item in at.markdown)
    assert "Orchard Lease" in shown and "Zeppelin" not in shown and "Loose Memo" not in shown
    at = open_page(
        _signed_in(app_test, world, Role.VIEWER),
        "views/collections.py",
        collection=str(world.collection_b),
    )
    assert "Matter B" not in str(at.selectbox[0].options)
    at = open_page(_signed_in(app_test, world, Role.VIEWER), "views/monitoring.py")
    assert not at.exception and "Zeppelin" not in all_text(at)  # monitoring shows no titles
    at = open_page(_signed_in(app_test, world, Role.ADMIN), "views/search.py")
    at.text_input(key="search-query").input(ONLY_IN_B).run()
    assert "Zeppelin Merger" in " ".join(str(item.value) for item in at.markdown)


def test_sign_in_by_name_sign_out_and_a_disabled_user_s_session_ends(
    app_test, sessions, world
) -> None:
    at = app_test().run()
    assert [t.value for t in at.title] == ["LongDoc"]  # the sign-in form only
    at.text_input[0].set_value("vera")
    at.text_input[1].set_value(PASSWORD)
    at.button[0].click().run()
    assert not at.exception
    assert "vera (viewer)" in " ".join(str(c.value) for c in at.sidebar.caption)
    # The admin disables vera: her next rerun shows the sign-in form again.
    with sessions() as session:
        accounts.set_disabled(session=session, actor=local_admin(), name="vera")
        session.commit()
    at.run()
    assert [t.value for t in at.title] == ["LongDoc"]
    assert "Your session has ended" in all_text(at)
    # edna signs in and out.
    at.text_input[0].set_value("edna")
    at.text_input[1].set_value(PASSWORD)
    at.button[0].click().run()
    (sign_out,) = [b for b in at.sidebar.button if b.label == "Sign out"]
    sign_out.click().run()
    assert [t.value for t in at.title] == ["LongDoc"]
    with sessions() as session:
        rows = [(e.user_name, e.action, e.outcome) for e in audit.list_events(session=session)]
    assert [r for r in rows if r[1] in ("sign_in", "sign_out")] == [
        ("vera", "sign_in", "ok"),
        ("edna", "sign_in", "ok"),
        ("edna", "sign_out", "ok"),
    ]


def test_the_audit_page_is_for_admins(app_test, sessions, world) -> None:
    at = open_page(_signed_in(app_test, world, Role.ADMIN), "views/audit.py")
    assert not at.exception and "Audit log" in [t.value for t in at.title]
    # Not in a viewer's navigation at all.
    at = _signed_in(app_test, world, Role.VIEWER).run()
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("views/audit.py")


def test_the_sign_in_limits_stay_and_every_attempt_is_logged(
    app_test, sessions, world, monkeypatch
) -> None:
    from ui import sign_in_limits

    # The limit for everyone: AppTest gives no client address of its own.
    limiter = sign_in_limits.SignInLimiter(max_global_failures=1)
    monkeypatch.setattr(sign_in_limits, "limiter", limiter)
    monkeypatch.setattr("ui.auth.FAILURE_DELAY_S", 0.0)
    at = app_test().run()
    for password in ("a wrong guess", PASSWORD):  # the right one too, once locked
        at.text_input[0].set_value("ada")
        at.text_input[1].set_value(password)
        at.button[0].click().run()
    assert "sign-in is paused for everyone" in all_text(at)
    with sessions() as session:
        events = audit.list_events(session=session)
    assert [(e.user_name, e.outcome) for e in events] == [("ada", "failed"), ("ada", "locked")]
    assert "a wrong guess" not in audit.render_csv(events)
