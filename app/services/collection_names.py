"""Collection names: which collection a name picks, and which names may not be given.

A name is unique per owner (migration 0016), not across the library, so that nobody learns from
a refused name that a collection they may not read exists. Every lookup is among the
collections the acting user may read (`among`: their ids; None: every one, an admin's), and:

- "#ID" picks the collection with that id (ids are never reused); a name may not have that form.
- Otherwise the name picks the collections named so exactly, else those that read the same
  (Unicode normalized, invisible characters and case aside).
- Two collections a user may read can share a name (an admin sees every owner's "Smith"): the
  lookup is then refused with a sentence naming each one's id and owner, AmbiguousCollection.

Names are compared here rather than in SQL, whose lower() is ASCII-only on SQLite; a library
holds few collections.
"""

from __future__ import annotations

import re
from collections.abc import Collection as Ids
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Collection, User
from app.display import display_name, typed_text
from app.errors import AmbiguousCollection, InvalidCollection

MAX_NAME_CHARS = 200
ID_PREFIX = "#"
_BY_ID = re.compile(r"#([0-9]+)")
ADMINS = "the admins"  # whose a collection without an owner is


def by_id(text: str) -> int | None:
    """The id that "#ID" names; None for a name."""
    match = _BY_ID.fullmatch(text.strip())
    return int(match.group(1)) if match else None


def checked_name(name: str) -> str:
    """The name as stored (one line, as typed); InvalidCollection for one that cannot be used."""
    clean = typed_text(display_name(name))
    if not clean:
        raise InvalidCollection(
            "A collection needs a name with at least one visible character."
            if name.strip()
            else "A collection needs a name."
        )
    if len(clean) > MAX_NAME_CHARS:
        raise InvalidCollection(f"A collection's name has at most {MAX_NAME_CHARS} characters.")
    if by_id(clean) is not None:
        raise InvalidCollection(
            f"A collection's name may not be {ID_PREFIX!r} and a number: that is how a "
            "collection is picked by its id."
        )
    return clean


def _key(name: str) -> str:
    return typed_text(name).casefold()


def same_named(session: Session, name: str) -> list[Collection]:
    """Every collection whose name reads as `name` does, whoever may read it (oldest first)."""
    key = _key(name)
    rows = session.scalars(select(Collection).order_by(Collection.id))
    return [row for row in rows if _key(row.name) == key]


def matching(session: Session, text: str, *, among: Ids[int] | None) -> list[Collection]:
    """The collections among `among` (ids; None: every one) that `text` picks: "#ID" that one;
    a name those named exactly so, else those whose name reads the same."""
    wanted_id = by_id(text)
    if wanted_id is not None:
        found = session.get(Collection, wanted_id)
        return [found] if found is not None and (among is None or found.id in among) else []
    clean = typed_text(text)
    if not clean:
        return []
    readable = [row for row in same_named(session, clean) if among is None or row.id in among]
    exact = [row for row in readable if row.name == clean]
    return exact or readable


def find(session: Session, text: str, *, among: Ids[int] | None) -> Collection | None:
    """The one collection `text` picks among `among`; None if none; AmbiguousCollection (with
    a sentence naming each one's id and owner) if several."""
    found = matching(session, text, among=among)
    if len(found) > 1:
        raise AmbiguousCollection(ambiguity_sentence(session, found))
    return found[0] if found else None


def owner_names(session: Session, owner_ids: Iterable[int | None]) -> dict[int, str]:
    wanted = {i for i in owner_ids if i is not None}
    if not wanted:
        return {}
    return dict(session.execute(select(User.id, User.name).where(User.id.in_(wanted))).all())


def ambiguity_sentence(session: Session, found: list[Collection]) -> str:
    owners = owner_names(session, (row.owner_id for row in found))
    listed = ", ".join(
        f"{ID_PREFIX}{row.id} ({whose(owners.get(row.owner_id or 0))})" for row in found
    )
    return (
        f"{len(found)} collections you may open are named {found[0].name!r}: {listed}. Name one "
        f"by its id, as {ID_PREFIX}{found[0].id} (quoted in a shell: '{ID_PREFIX}{found[0].id}'); "
        "`longdoc collections list` shows the ids."
    )


def whose(owner_name: str | None) -> str:
    """ "alice's", or "the admins'" for a collection without an owner."""
    return f"{owner_name}'s" if owner_name else f"{ADMINS}'"


def refuse_taken(
    session: Session,
    name: str,
    *,
    owner_id: int | None,
    readable: Ids[int] | None,
    renaming: int | None = None,
) -> None:
    """InvalidCollection when `name` may not be given to a collection of `owner_id` by a user
    who may read `readable` (None: every one): a collection they may read has it, or its owner
    has one of that name (the database's rule). A same-named collection of another owner that
    they may not read does not stop them, and is never mentioned."""
    others = [row for row in same_named(session, name) if row.id != renaming]
    for row in others:
        if readable is None or row.id in readable:
            raise InvalidCollection(f"There is already a collection named {row.name!r}.")
    if owner_id is not None and any(row.owner_id == owner_id for row in others):
        # The owner's own name, in a collection this user may not read: when creating, their
        # own (a grant taken back since); when renaming another's collection they may write,
        # its owner's (a write grant lets one learn that much of the owner's names).
        raise InvalidCollection(
            f"The owner of this collection already has another named {name!r}; choose another name."
            if renaming is not None
            else f"You already own a collection named {name!r} (one you may no longer open); "
            "choose another name."
        )
