"""Initial schema: entries, signatures, runs, results, workers, and the FTS5 indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# `_` is part of a token so identifiers (num_batches_tracked) and placeholders (_num_) stay whole.
TOKENIZE = "unicode61 tokenchars '_'"


def upgrade() -> None:
    op.create_table(
        "entry",
        sa.Column("slug", sa.String(), primary_key=True),
        sa.Column("category", sa.String(), nullable=False, index=True),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("summary", sa.String(), nullable=False),
        sa.Column("cause", sa.String(), nullable=False),
        sa.Column("fix", sa.String(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "signature",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("entry_slug", sa.String(), sa.ForeignKey("entry.slug", ondelete="CASCADE"), index=True),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("normalized", sa.String(), nullable=False),
        sa.Column("tokens", sa.String(), nullable=False),
        sa.Column("aux", sa.String(), nullable=False),
    )
    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("entry_slug", sa.String(), nullable=False, index=True),
        sa.Column("state", sa.String(), nullable=False, index=True),
        sa.Column("job", sa.JSON(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("worker_id", sa.String(), nullable=True),
        sa.Column("lease", sa.String(), nullable=True),
        sa.Column("lease_expires", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "result",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("entry_slug", sa.String(), nullable=False, index=True),
        sa.Column("part", sa.String(), nullable=False),
        sa.Column("snippet_hash", sa.String(), nullable=False, index=True),
        sa.Column("torch_version", sa.String(), nullable=False),
        sa.Column("device", sa.String(), nullable=False),
        sa.Column("outcome", sa.JSON(), nullable=False),
        sa.Column("expected", sa.Boolean(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint(
            "entry_slug", "part", "snippet_hash", "torch_version", "device", name="uq_result_key"
        ),
    )
    op.create_table(
        "worker",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("device", sa.String(), nullable=False),
        sa.Column("torch_version", sa.String(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("hostname", sa.String(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "meta",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.String(), nullable=False),
    )

    if op.get_bind().dialect.name != "sqlite":
        return  # FTS5 is SQLite's; PostgreSQL's full-text index comes in 0004_postgres
    # Signature index: external content over `signature`, kept in step by triggers.
    op.execute(
        f"CREATE VIRTUAL TABLE sig_fts USING fts5(tokens, aux, content='signature', content_rowid='id', tokenize=\"{TOKENIZE}\")"
    )
    op.execute(
        "CREATE TRIGGER signature_ai AFTER INSERT ON signature BEGIN "
        "INSERT INTO sig_fts(rowid, tokens, aux) VALUES (new.id, new.tokens, new.aux); END"
    )
    op.execute(
        "CREATE TRIGGER signature_ad AFTER DELETE ON signature BEGIN "
        "INSERT INTO sig_fts(sig_fts, rowid, tokens, aux) VALUES ('delete', old.id, old.tokens, old.aux); END"
    )
    op.execute(
        "CREATE TRIGGER signature_au AFTER UPDATE ON signature BEGIN "
        "INSERT INTO sig_fts(sig_fts, rowid, tokens, aux) VALUES ('delete', old.id, old.tokens, old.aux); "
        "INSERT INTO sig_fts(rowid, tokens, aux) VALUES (new.id, new.tokens, new.aux); END"
    )
    op.execute("CREATE VIRTUAL TABLE sig_vocab USING fts5vocab(sig_fts, 'row')")
    # Free-text index over what a reader would search for; written by the content sync.
    op.execute(
        "CREATE VIRTUAL TABLE entry_fts USING fts5(slug UNINDEXED, title, summary, body, "
        "tokenize='porter unicode61')"
    )
    op.execute("CREATE VIRTUAL TABLE entry_vocab USING fts5vocab(entry_fts, 'row')")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for table in ("meta", "worker", "result", "run", "signature", "entry"):
            op.drop_table(table)
        return
    for name in ("entry_vocab", "entry_fts", "sig_vocab"):
        op.execute(f"DROP TABLE IF EXISTS {name}")
    for trig in ("signature_ai", "signature_ad", "signature_au"):
        op.execute(f"DROP TRIGGER IF EXISTS {trig}")
    op.execute("DROP TABLE IF EXISTS sig_fts")
    for table in ("meta", "worker", "result", "run", "signature", "entry"):
        op.drop_table(table)
