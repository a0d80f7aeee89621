"""jobs: the process that owns a job run outside the workers, and runs lost with their worker

Revision ID: 0005
Revises: 0001 (the lead re-chains it at merge)
Create Date: 2026-12-01 18:00:00

owner_host and owner_pid name the CLI process that runs an ingest itself (`longdoc ingest`);
NULL for jobs the workers run, so the restart sweep re-queues only those
(worker/jobs/recovery.py). num_unfinished_runs counts the task runs of a job that started and never
ended, because the worker process died under them (worker/jobs/poison.py fails the job after
LONGDOC_MAX_WORKER_DEATHS of them).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (no table rebuild on SQLite): nullable, or a default.
    op.add_column("jobs", sa.Column("owner_host", sa.String(length=255), nullable=True))
    op.add_column("jobs", sa.Column("owner_pid", sa.Integer(), nullable=True))
    op.add_column(
        "jobs",
        sa.Column("num_unfinished_runs", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("num_unfinished_runs")
        batch.drop_column("owner_pid")
        batch.drop_column("owner_host")
