"""Drop schema nothing reads: the FTS5 signature index (with its triggers and vocabulary tables), the
free-text vocabulary table, and `signature.normalized`.

The signature matcher builds its index in memory from `signature.tokens`/`aux` (`app.search`), so
the FTS5 copy of them only cost three trigger writes per signature on every sync.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TOKENIZE = "unicode61 tokenchars '_'"  # as 0001 created it


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("entry_vocab", "sig_vocab"):
            op.execute(f"DROP TABLE IF EXISTS {name}")
        for trig in ("signature_ai", "signature_ad", "signature_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trig}")
        op.execute("DROP TABLE IF EXISTS sig_fts")
    with op.batch_alter_table("signature") as batch:
        batch.drop_column("normalized")


def downgrade() -> None:
    with op.batch_alter_table("signature") as batch:
        batch.add_column(sa.Column("normalized", sa.String(), nullable=False, server_default=""))
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        f"CREATE VIRTUAL TABLE sig_fts USING fts5(tokens, aux, content='signature', content_rowid='id', "
        f'tokenize="{TOKENIZE}")'
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
    op.execute("INSERT INTO sig_fts(sig_fts) VALUES ('rebuild')")
    op.execute("CREATE VIRTUAL TABLE sig_vocab USING fts5vocab(sig_fts, 'row')")
    op.execute("CREATE VIRTUAL TABLE entry_vocab USING fts5vocab(entry_fts, 'row')")
