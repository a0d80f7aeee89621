"""document ids never reused: SQLite's counter for `documents` raised to the largest id known

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 06:30:00

Migration 0013 rebuilt `documents` on SQLite (batch mode) to add its owner. The table kept
AUTOINCREMENT, but the rebuilt table's counter (sqlite_sequence) restarted from the largest id
left in it: when the newest documents had been deleted, their ids were given again to the next
documents stored, so a link, a bookmark, a cache or a task naming a deleted document could reach
another one. 0013 now keeps the counter; this migration repairs databases migrated before it did.

The ids lost by that rebuild are remembered nowhere for sure, so the counter is raised to the
largest document id for which evidence survives (it is never lowered):
- the counter itself, and the largest id in `documents`;
- ids the audit log names in rows of allowed actions (outcome "ok": view, ask, summarize,
  delete, upload, export, and the documents added to a collection): an allowed action names a
  document that existed. Refused rows are not evidence: anyone may ask for any id, and a huge one
  would exhaust the counter;
- ids cited by answers across collections (collection_answers.document_ids).
A document deleted before 0013 and never named since leaves no trace (the audit log begins with
0013); its id may still be given once more. Pruning the audit log removes evidence too.

Only `documents` needs this: 0016 kept the counter of `collections`, and no other table with an
id has been rebuilt since 0012. PostgreSQL's sequences are not touched by table changes: nothing
to do there. A downgrade leaves the counter as it is (a higher counter only skips ids).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The largest document id known to have been given (NULL when there is no evidence at all).
LARGEST_KNOWN_DOCUMENT_ID = """
SELECT max(id) FROM (
    SELECT seq AS id FROM sqlite_sequence WHERE name = 'documents'
    UNION ALL SELECT max(id) FROM documents
    UNION ALL SELECT max(ids.value) FROM audit_events AS event, json_each(event.target_ids) AS ids
        WHERE event.outcome = 'ok' AND event.target_kind = 'document' AND ids.type = 'integer'
    -- adding documents to a collection names the collection first, then the documents
    UNION ALL SELECT max(ids.value) FROM audit_events AS event, json_each(event.target_ids) AS ids
        WHERE event.outcome = 'ok' AND event.action = 'collection_write'
        AND event.target_kind = 'collection' AND ids.key > 0 AND ids.type = 'integer'
    UNION ALL SELECT max(ids.value) FROM collection_answers AS answer,
        json_each(answer.document_ids) AS ids WHERE ids.type = 'integer'
)
"""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    largest = bind.execute(sa.text(LARGEST_KNOWN_DOCUMENT_ID)).scalar()
    if not largest:
        return
    bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = 'documents'"))
    bind.execute(
        sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES ('documents', :seq)"),
        {"seq": largest},
    )


def downgrade() -> None:
    pass
