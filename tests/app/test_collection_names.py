"""Collection names are unique per owner (migration 0016), on SQLite and PostgreSQL: naming a
collection like one the user may not read succeeds and never mentions it; a name is refused
when a collection they may read has it; a name several readable collections share is refused
with their ids and owners, and "#ID" picks one, in the services as in every way in."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import AuditEvent, Collection, CollectionGrant, Role, User
from app.errors import AmbiguousCollection, InvalidCollection, NotFound
from app.services import access, acting, collections
from app.services.access import AccessRefused, Actor


def _user(session: Session, name: str, role: Role = Role.EDITOR) -> Actor:
    user = User(name=name, role=role, password_hash="x")
    session.add(user)
    session.flush()
    return Actor(user_id=user.id, name=name, role=role)


def _targets_of(session: Session, actor: Actor) -> set[int]:
    """The collections `actor`'s audit rows name."""
    rows = session.scalars(select(AuditEvent).where(AuditEvent.user_id == actor.user_id))
    return {i for row in rows if row.target_kind == "collection" for i in row.target_ids}


def test_an_editor_names_a_collection_like_one_they_may_not_read(session: Session) -> None:
    alice, bob = _user(session, "alice"), _user(session, "bob")
    theirs = acting.create_collection(session=session, actor=alice, name="Matter X")
    session.commit()
    mine = acting.create_collection(session=session, actor=bob, name="matter x")
    session.commit()
    assert mine.id != theirs.id and (mine.name, mine.owner_id) == ("matter x", bob.user_id)
    session.refresh(theirs)
    assert (theirs.name, theirs.owner_id) == ("Matter X", alice.user_id)  # untouched
    assert session.get(CollectionGrant, (bob.user_id, theirs.id)) is None
    # bob's name now picks his own; alice's is still hers alone.
    assert (
        acting.find_collection(session=session, actor=bob, name="Matter X", action="view") == mine
    )
    assert (
        acting.find_collection(session=session, actor=alice, name="matter x", action="x") == theirs
    )
    # Renaming into the hidden name works as creating does, and never mentions it.
    other = acting.create_collection(session=session, actor=bob, name="Notes")
    with pytest.raises(InvalidCollection, match="already a collection named 'matter x'"):
        acting.rename_collection(
            session=session, actor=bob, collection_id=other.id, name="MATTER X"
        )
    acting.create_collection(session=session, actor=alice, name="Secret")
    session.commit()
    renamed = acting.rename_collection(
        session=session, actor=bob, collection_id=other.id, name="Secret"
    )
    assert renamed.name == "Secret" and renamed.owner_id == bob.user_id
    assert theirs.id not in _targets_of(session, bob)


def test_a_name_is_refused_for_its_owner_and_for_whom_may_read_it(session: Session) -> None:
    alice, bob = _user(session, "alice"), _user(session, "bob")
    admin = _user(session, "ada", Role.ADMIN)
    smith = acting.create_collection(session=session, actor=alice, name="Smith")
    session.commit()
    with pytest.raises(InvalidCollection, match="There is already a collection named 'Smith'"):
        acting.create_collection(session=session, actor=alice, name="SMITH")
    with pytest.raises(InvalidCollection, match="There is already a collection named 'Smith'"):
        acting.create_collection(session=session, actor=admin, name="smith")  # reads every one
    session.add(CollectionGrant(user_id=bob.user_id, collection_id=smith.id, can_write=False))
    session.commit()
    with pytest.raises(InvalidCollection, match="already a collection named 'Smith'"):
        acting.create_collection(session=session, actor=bob, name="Smith")  # he may read it
    # alice's grant taken back: still her name (the database's rule, unique per owner).
    session.delete(session.get(CollectionGrant, (alice.user_id, smith.id)))
    session.commit()
    with pytest.raises(InvalidCollection, match="You already own a collection named 'Smith'"):
        acting.create_collection(session=session, actor=alice, name="Smith")
    with pytest.raises(InvalidCollection, match="is how a collection is picked by its id"):
        acting.create_collection(session=session, actor=alice, name=" #12 ")
    assert session.scalar(select(Collection.id).where(Collection.name != "Smith")) is None


def test_renaming_anothers_collection_keeps_the_name_unique_for_its_owner(
    session: Session,
) -> None:
    alice, bob = _user(session, "alice"), _user(session, "bob")
    shared = acting.create_collection(session=session, actor=alice, name="Shared")
    acting.create_collection(session=session, actor=alice, name="Private")
    session.add(CollectionGrant(user_id=bob.user_id, collection_id=shared.id, can_write=True))
    session.commit()
    with pytest.raises(InvalidCollection, match="owner of this collection already has another"):
        acting.rename_collection(
            session=session, actor=bob, collection_id=shared.id, name="Private"
        )
    with pytest.raises(AccessRefused):  # a viewer of nothing may rename nothing
        acting.rename_collection(
            session=session, actor=_user(session, "cy"), collection_id=shared.id, name="Z"
        )


def test_a_name_two_readable_collections_share_is_refused_with_their_ids(
    session: Session,
) -> None:
    alice, bob = _user(session, "alice"), _user(session, "bob")
    admin = _user(session, "ada", Role.ADMIN)
    hers = acting.create_collection(session=session, actor=alice, name="Matter X")
    his = acting.create_collection(session=session, actor=bob, name="Matter X")
    legacy = collections.create_collection(session=session, name="Legacy")  # the admins'
    session.commit()
    for actor in (admin, access.local_admin()):
        with pytest.raises(AmbiguousCollection) as refused:
            acting.find_collection(session=session, actor=actor, name="matter x", action="view")
        assert str(refused.value).startswith(
            f"2 collections you may open are named 'Matter X': #{hers.id} (alice's), "
            f"#{his.id} (bob's). Name one by its id, as #{hers.id}"
        )
        picked = acting.find_collection(
            session=session, actor=actor, name=f"#{his.id}", action="view"
        )
        assert picked == his
    assert acting.find_collection(session=session, actor=admin, name="legacy", action="x") == legacy
    with pytest.raises(NotFound, match="There is no collection #999999"):
        acting.find_collection(session=session, actor=admin, name="#999999", action="view")
    # bob: "#ID" of alice's and of none are refused alike (and both logged as refused).
    answers = []
    for text in (f"#{hers.id}", "#999999"):
        with pytest.raises(AccessRefused) as refused:
            acting.find_collection(session=session, actor=bob, name=text, action="view")
        answers.append(str(refused.value).replace(text, "TARGET"))
    assert (
        answers[0]
        == answers[1]
        == ("There is no collection TARGET that you may open; see `longdoc collections list`.")
    )
    assert acting.find_collection(session=session, actor=bob, name=f"#{his.id}", action="x") == his
    # Lists tell them apart where they would read the same.
    admin_rows = acting.list_collections(session=session, actor=admin)
    assert collections.picker_labels(admin_rows) == {
        hers.id: f"Matter X (alice's, #{hers.id})",
        his.id: f"Matter X (bob's, #{his.id})",
        legacy.id: "Legacy",
    }
    bob_rows = acting.list_collections(session=session, actor=bob)
    assert collections.picker_labels(bob_rows) == {his.id: "Matter X"}
