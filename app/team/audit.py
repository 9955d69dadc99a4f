"""Who did what: one row per curator or user action (draft created, feedback given, signed in)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from .models import TeamAction


def log(session: Session, user: str | None, action: str, target: str = "", detail: str = "") -> None:
    """Add an action to the session (the caller commits it with the change it describes)."""
    session.add(TeamAction(user=user or "anonymous", action=action, target=target, detail=detail[:500]))


def recent(session: Session, limit: int = 50) -> list[TeamAction]:
    return list(
        session.exec(
            select(TeamAction).order_by(col(TeamAction.at).desc(), col(TeamAction.id).desc()).limit(limit)
        ).all()
    )


def public(a: TeamAction) -> dict[str, Any]:
    return {
        "at": a.at.isoformat(),
        "user": a.user,
        "action": a.action,
        "target": a.target,
        "detail": a.detail,
    }
