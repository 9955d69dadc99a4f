"""What every `pitfalls` command shares: the consoles, this invocation's settings, a ready database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
import typer
from rich.console import Console

from .config import Settings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

out = Console()
err = Console(stderr=True)


def current_settings() -> Settings:
    """This invocation's settings, read from the environment once (kept on the root click context)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:  # called outside a command (a test, a script)
        return Settings()
    root = ctx.find_root()
    if not isinstance(root.obj, Settings):
        root.obj = Settings()
    return root.obj


@contextmanager
def ready_engine(s: Settings) -> Iterator[Engine]:
    """Migrate and sync, then lend an engine (CLI commands work on a fresh machine); its connections
    are closed when the block ends."""
    from . import content
    from .db import make_engine, migrate

    migrate(s)
    engine = make_engine(s)
    try:
        try:
            content.sync(engine, s.content_dir, team=s.team_content_dir)
        except content.ContentError as exc:
            err.print(f"[red]content error:[/red] {exc}")
            raise typer.Exit(2) from None
        yield engine
    finally:
        engine.dispose()
