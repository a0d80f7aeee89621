"""accounts: users, their grants on collections, documents' owners, and the audit log

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 22:30:00

Tables written from app/db/models.py (User, CollectionGrant, AuditEvent, Document.owner_id) and
checked against autogenerate. Deleting a user deletes their grants and leaves their documents
without an owner (admins see them); deleting a collection deletes its grants. The audit log has
no foreign key: a deleted user's rows stay.

The audit log is append-only: a trigger refuses every UPDATE of `audit_events` on both
databases (pruning past the retention setting deletes whole rows). Adding the owner rebuilds
`documents` on SQLite, with AUTOINCREMENT kept (migration 0012) and the largest id it ever gave
(the rebuilt table's counter would start from the largest id left, and give a deleted newest
document's id again; databases migrated before this was kept are repaired by 0017).

The first admin comes from the shared UI password (LONGDOC_UI_PASSWORD_HASH) the first time the
UI or `longdoc db upgrade` runs with it (app/services/accounts.py: ensure_first_admin): this
migration reads no settings.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# `documents` keeps its ids never reused (0012) when SQLite's batch mode rebuilds it.
TABLE_KWARGS = {"sqlite_autoincrement": True}
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
APPEND_ONLY = "the audit log is append-only"
SQLITE_TRIGGERS = (
    "CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events BEGIN "
    f"SELECT RAISE(ABORT, '{APPEND_ONLY}'); END",
)
SQLITE_TRIGGERS_DROP = ("DROP TRIGGER IF EXISTS audit_events_append_only",)
POSTGRES_TRIGGERS = (
    "CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS "
    f"$$ BEGIN RAISE EXCEPTION '{APPEND_ONLY}'; END $$",
    "CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events "
    "FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()",
)
POSTGRES_TRIGGERS_DROP = (
    "DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events",
    "DROP FUNCTION IF EXISTS audit_events_append_only()",
)


def _is_sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


@contextmanager
def _keeping_sqlite_sequence(table: str) -> Iterator[None]:
    """SQLite's rebuild copies the rows into a new table, whose sqlite_sequence entry is the
    largest id copied: the id of the row deleted last would be given again. The largest id ever
    given is put back (as in 0016)."""
    if not _is_sqlite():
        yield
        return
    bind = op.get_bind()
    query = sa.text("SELECT seq FROM sqlite_sequence WHERE name = :table")
    before = bind.execute(query, {"table": table}).scalar() or 0
    yield
    largest = max(before, bind.execute(query, {"table": table}).scalar() or 0)
    bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :table"), {"table": table})
    if largest:
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:table, :seq)"),
            {"table": table, "seq": largest},
        )


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column(
            "role",
            sa.Enum(
                "admin",
                "editor",
                "viewer",
                name="user_role",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("is_disabled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("sessions_valid_after", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "collection_grants",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("can_write", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["collection_id"],
            ["collections.id"],
            name=op.f("fk_collection_grants_collection_id_collections"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_collection_grants_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", "collection_id", name=op.f("pk_collection_grants")),
    )
    op.create_index(
        op.f("ix_collection_grants_collection_id"), "collection_grants", ["collection_id"]
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("user_name", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column(
            "target_kind", sa.String(length=16), server_default=sa.text("''"), nullable=False
        ),
        sa.Column("target_ids", JSON, server_default=sa.text("'[]'"), nullable=False),
        sa.Column("details", JSON, nullable=False),
        sa.Column("origin", sa.String(length=100), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_audit_events_at"), "audit_events", ["at"])
    op.create_index(op.f("ix_audit_events_user_id"), "audit_events", ["user_id"])
    for statement in SQLITE_TRIGGERS if _is_sqlite() else POSTGRES_TRIGGERS:
        op.execute(statement)

    with (
        _keeping_sqlite_sequence("documents"),
        op.batch_alter_table("documents", table_kwargs=TABLE_KWARGS) as batch_op,
    ):
        batch_op.add_column(sa.Column("owner_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_documents_owner_id"), ["owner_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_documents_owner_id_users"),
            "users",
            ["owner_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with (
        _keeping_sqlite_sequence("documents"),
        op.batch_alter_table("documents", table_kwargs=TABLE_KWARGS) as batch_op,
    ):
        batch_op.drop_constraint(batch_op.f("fk_documents_owner_id_users"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_documents_owner_id"))
        batch_op.drop_column("owner_id")
    for statement in SQLITE_TRIGGERS_DROP if _is_sqlite() else POSTGRES_TRIGGERS_DROP:
        op.execute(statement)
    op.drop_index(op.f("ix_audit_events_user_id"), table_name="audit_events")
    op.drop_index(op.f("ix_audit_events_at"), table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index(op.f("ix_collection_grants_collection_id"), table_name="collection_grants")
    op.drop_table("collection_grants")
    op.drop_table("users")
