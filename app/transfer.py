"""Copy a database's history to another one: moving from SQLite to PostgreSQL (`pitfalls copy-db`).

Entries, signatures and search indexes come from the content folders, so the target is migrated and
synced from them; what only the database knows is copied row by row, ids kept: runs (with their
outcomes), the latest results per snippet, the workers seen, and the team's feedback, missed
searches and actions. PostgreSQL's id sequences are moved past the copied ids.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import MetaData, func, inspect, select, text
from sqlalchemy.engine import Engine

HISTORY = ("worker", "run", "result", "missed_search", "feedback", "team_action")  # copied in this order
BATCH = 1000


class TransferError(Exception):
    """The copy cannot start (the target already has history); nothing was written."""


def _tables(engine: Engine) -> MetaData:
    from sqlmodel import SQLModel

    from . import models  # noqa: F401  (registers the tables)
    from .team import models as team_models  # noqa: F401

    present = set(inspect(engine).get_table_names())
    meta = MetaData()
    for name in HISTORY:
        if name in present and name in SQLModel.metadata.tables:
            SQLModel.metadata.tables[name].to_metadata(meta)
    return meta


def _aware(row: dict[str, Any]) -> dict[str, Any]:
    # SQLite keeps datetimes without a zone; they are UTC (models.utcnow)
    return {
        k: v.replace(tzinfo=UTC) if isinstance(v, datetime) and v.tzinfo is None else v
        for k, v in row.items()
    }


def copy_history(source: Engine, target: Engine) -> dict[str, int]:
    """Copy HISTORY's tables from `source` to the (migrated, synced) `target`, in one transaction."""
    src_tables, dst_tables = _tables(source), _tables(target)
    with target.connect() as dst:
        for name in ("run", "result"):
            if (
                name in dst_tables.tables
                and dst.execute(select(func.count()).select_from(dst_tables.tables[name])).scalar()
            ):
                raise TransferError(
                    f"the target database already has rows in {name!r}: copy into a new database"
                )
    counts: dict[str, int] = {}
    with source.connect() as src, target.begin() as dst:
        for name in HISTORY:
            if name not in src_tables.tables or name not in dst_tables.tables:
                continue
            table, into = src_tables.tables[name], dst_tables.tables[name]
            columns = [c.name for c in into.columns if c.name in table.columns]
            counts[name] = 0
            result = src.execute(select(*(table.c[c] for c in columns)).order_by(*table.primary_key.columns))
            while batch := result.fetchmany(BATCH):
                dst.execute(into.insert(), [_aware(dict(r._mapping)) for r in batch])
                counts[name] += len(batch)
        if target.dialect.name == "postgresql":  # the next new row must not reuse a copied id
            for name in counts:
                pk = list(dst_tables.tables[name].primary_key.columns)
                if len(pk) == 1 and pk[0].autoincrement is not False and pk[0].type.python_type is int:
                    dst.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{name}', '{pk[0].name}'), "
                            f"coalesce((SELECT max({pk[0].name}) FROM {name}), 0) + 1, false)"
                        )
                    )
    return counts
