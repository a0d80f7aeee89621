"""collection owners: a collection's name is unique per owner, not across the library

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05 05:00:00

Accounts (issue 25): an editor who named a new collection like another team's matter was told
that it exists ("There is already a collection named ..."), though they may not read it. A
collection now has an owner, the user who created it, and (owner_id, name) is unique instead
of the name; which names a person may not reuse is decided in app/services/collections.py (the
names of the collections they may read).

Collections stored before this migration keep no owner (NULL), as documents did in 0013: NULL
means "the admins'" (made by the local admin, the inbox without a user, or before accounts),
and deleting a user leaves their collections to the admins (ON DELETE SET NULL). Nobody's
access changes: reading and writing a collection still follow its grants. The database's
uniqueness does not cover collections without an owner (NULLs differ in a unique constraint on
SQLite and PostgreSQL alike); those are made by admins, who may read every collection, so the
service's check refuses a second one of a name.

SQLite rebuilds the table (batch mode); the largest id it ever gave is kept, so that ids stay
never reused (0012). A downgrade restores the global uniqueness and refuses, with a sentence, while two collections
share a name (renaming one is for a person to decide).
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The table keeps its ids never reused (0012) when SQLite's batch mode rebuilds it.
TABLE_KWARGS = {"sqlite_autoincrement": True}


@contextmanager
def _keeping_sqlite_sequence() -> Iterator[None]:
    """SQLite's rebuild copies the rows into a new table, whose sqlite_sequence entry is the
    largest id copied: the id of a collection deleted last would be given again. The largest
    id ever given is put back."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    query = sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'collections'")
    before = bind.execute(query).scalar() or 0
    yield
    largest = max(before, bind.execute(query).scalar() or 0)
    bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = 'collections'"))
    if largest:
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES ('collections', :seq)"),
            {"seq": largest},
        )


def upgrade() -> None:
    with (
        _keeping_sqlite_sequence(),
        op.batch_alter_table("collections", table_kwargs=TABLE_KWARGS) as batch_op,
    ):
        batch_op.add_column(sa.Column("owner_id", sa.Integer(), nullable=True))
        batch_op.drop_constraint(batch_op.f("uq_collections_name"), type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_collections_owner_id_name"), ["owner_id", "name"]
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_collections_owner_id_users"),
            "users",
            ["owner_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    shared = op.get_bind().execute(
        sa.text(
            "SELECT count(*) FROM (SELECT name FROM collections GROUP BY name "
            "HAVING count(*) > 1) AS shared"
        )
    )
    num_shared = shared.scalar() or 0
    if num_shared:
        raise RuntimeError(
            f"{num_shared} collection name(s) are used by several owners; rename the collections "
            "(`longdoc collections rename '#ID' NEW`) so that every name is used once before "
            "downgrading below 0016."
        )
    with (
        _keeping_sqlite_sequence(),
        op.batch_alter_table("collections", table_kwargs=TABLE_KWARGS) as batch_op,
    ):
        batch_op.drop_constraint(batch_op.f("fk_collections_owner_id_users"), type_="foreignkey")
        batch_op.drop_constraint(batch_op.f("uq_collections_owner_id_name"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_collections_name"), ["name"])
        batch_op.drop_column("owner_id")
