"""Team features (issue 13): missed searches, feedback, team notes, and who did what.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "missed_search",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("template", sa.String(), nullable=False, unique=True),
        sa.Column("example", sa.String(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("best_slug", sa.String(), nullable=True),
        sa.Column("draft_path", sa.String(), nullable=True),
        sa.Column("drafted_by", sa.String(), nullable=True),
        sa.Column("drafted_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("entry_slug", sa.String(), nullable=False),
        sa.Column("verdict", sa.String(), nullable=False),
        sa.Column("lines", sa.String(), nullable=False, server_default=""),
        sa.Column("comment", sa.String(), nullable=False, server_default=""),
        sa.Column("used_slug", sa.String(), nullable=True),
        sa.Column("user", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    )
    op.create_index("ix_feedback_entry_verdict", "feedback", ["entry_slug", "verdict"])
    op.create_table(
        "team_note",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("entry_slug", sa.String(), nullable=False, index=True),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
    )
    op.create_table(
        "team_action",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False, server_default=""),
        sa.Column("detail", sa.String(), nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("team_action")
    op.drop_table("team_note")
    op.drop_index("ix_feedback_entry_verdict", table_name="feedback")
    op.drop_table("feedback")
    op.drop_table("missed_search")
