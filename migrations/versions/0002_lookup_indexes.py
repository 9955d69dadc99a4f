"""Composite indexes for the two hot lookups: an entry's latest result, and expired leases.

- `runs.latest_results` asks, for every entry page, for the newest `result` row of one entry, part
  and snippet hash: `ix_result_latest` answers it from the index in order, without the temporary
  sort SQLite needs when it only has the unique key.
- `runs.expire_leases` runs on every lease poll (about once a second per idle worker) and looks for
  running runs whose lease has expired: `ix_run_state_lease` answers it without reading every
  running row.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_result_latest", "result", ["entry_slug", "part", "snippet_hash", "recorded_at"])
    op.create_index("ix_run_state_lease", "run", ["state", "lease_expires"])


def downgrade() -> None:
    op.drop_index("ix_run_state_lease", table_name="run")
    op.drop_index("ix_result_latest", table_name="result")
