"""PostgreSQL's free-text index (nothing changes on SQLite).

On PostgreSQL, `entry_fts` is a plain table with the same columns the content sync writes into FTS5 on
SQLite (slug, title, summary, body), plus a stored, generated `tsvector` (title weighted A, summary B,
body C) under a GIN index: `app.search_store` ranks it with `ts_rank_cd` and `websearch_to_tsquery`. So
the content sync's INSERT/DELETE statements are the same on both backends. SQLite keeps its FTS5 tables
from 0001. (The signature matcher's index is built in memory from `signature` rows: the FTS5 signature
tables have no PostgreSQL counterpart.)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE TABLE entry_fts (slug varchar PRIMARY KEY, title varchar NOT NULL, summary varchar NOT NULL, "
        "body varchar NOT NULL, tsv tsvector GENERATED ALWAYS AS ("
        "setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', summary), 'B') || "
        "setweight(to_tsvector('english', body), 'C')) STORED)"
    )
    op.execute("CREATE INDEX ix_entry_fts_tsv ON entry_fts USING gin (tsv)")
    # entries synced before this migration get their rows (the next sync rewrites what it changes)
    op.execute(
        "INSERT INTO entry_fts (slug, title, summary, body) "
        "SELECT slug, title, summary, cause || ' ' || fix FROM entry"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TABLE IF EXISTS entry_fts")
