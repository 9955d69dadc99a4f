"""Request dependencies as Annotated aliases, so routes stay short."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Annotated, cast

from fastapi import Depends, Header, HTTPException, Path, Request
from sqlmodel import Session

from ..config import Settings
from ..search import Searcher


def get_settings(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)  # set once by create_app


def get_session(request: Request) -> Iterator[Session]:
    with Session(request.app.state.engine) as session:
        yield session


def get_searcher(request: Request) -> Searcher:
    return cast(Searcher, request.app.state.searcher)  # set once by create_app


def require_worker(request: Request, authorization: Annotated[str | None, Header()] = None) -> None:
    """Workers send `Authorization: Bearer <token>`: the configured token, or the local workers' one."""
    scheme, _, token = (authorization or "").partition(" ")
    valid = [t for t in (request.app.state.settings.worker_token, request.app.state.local_token) if t]
    if scheme.lower() != "bearer" or not any(
        secrets.compare_digest(token.encode(), t.encode()) for t in valid
    ):
        raise HTTPException(401, "missing or wrong worker token", headers={"WWW-Authenticate": "Bearer"})


RunId = Annotated[int, Path(ge=1, le=2**63 - 1, description="A run's id.")]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
SearcherDep = Annotated[Searcher, Depends(get_searcher)]
WorkerAuth = Depends(require_worker)
