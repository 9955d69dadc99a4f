"""Build the FastAPI app from settings (`create_app`); nothing happens at import time.

`pitfalls serve` builds it; any ASGI server can too: `uvicorn --factory app.main:create_app`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from sqlmodel import Session
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import content, runs
from .config import Settings
from .db import QueueListener, make_engine, migrate, queue_listener, startup_lock
from .local_workers import LocalWorkers
from .search import Searcher
from .team.auth import ReadGate
from .web import api, workers
from .web.guard import Guard

log = logging.getLogger("pitfalls")


def create_app(settings: Settings | None = None, *, worker_url: str | None = None) -> FastAPI:
    """The app. `worker_url` (set by `pitfalls serve`) is where local workers reach this server."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        listener: QueueListener | None = None
        pool: LocalWorkers | None = None
        try:  # a start that fails (a content error) leaves no connection open either
            if settings.sync_on_start:
                with startup_lock(app.state.engine):  # replicas starting together take turns (PostgreSQL)
                    migrate(settings)
                    report = content.sync(
                        app.state.engine, settings.content_dir, team=settings.team_content_dir
                    )
                log.info("content synced: %s", report)
            with Session(app.state.engine) as session:
                if n := runs.mark_interrupted(session=session):
                    log.warning("%d runs left running by the last server were marked interrupted", n)
            app.state.queue_event = event = asyncio.Event()
            # PostgreSQL: a run queued by any replica wakes this one's long polls (SQLite: one process)
            loop = asyncio.get_running_loop()
            listener = queue_listener(app.state.engine, lambda: loop.call_soon_threadsafe(event.set))
            pool = LocalWorkers(settings, worker_url, app.state.local_token) if worker_url else None
            if pool:
                pool.start()
            yield
        finally:
            if pool:
                pool.stop()
            if listener:
                listener.stop()
            app.state.engine.dispose()

    # FastAPIOffline: /docs and /redoc from assets shipped in the package, so they work offline
    app = FastAPIOffline(
        title="Pitfalls",
        version="0.1.0",
        lifespan=lifespan,
        description="Search PyTorch errors, read the fix, reproduce it on a real worker.",
    )
    app.add_middleware(ReadGate, settings=settings)  # sign-in for reading, when the setting asks for it
    app.add_middleware(
        Guard,
        max_body_bytes=settings.max_body_bytes,
        script_hosts="" if settings.htmx_local else " https://cdn.jsdelivr.net",
    )
    app.state.settings = settings
    app.state.engine = make_engine(settings)
    app.state.searcher = Searcher.from_settings(app.state.engine, settings)
    app.state.local_token = secrets.token_urlsafe(24)
    app.state.queue_event = asyncio.Event()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # never echo the (possibly huge, possibly binary) input back
        errors = [{"loc": e.get("loc"), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # browsers asking for a page that isn't there get the styled 404, API clients JSON
        if (
            exc.status_code == 404
            and not request.url.path.startswith("/api/")
            and "text/html" in request.headers.get("accept", "")
        ):
            from .web.templating import not_found  # noqa: PLC0415

            return not_found(request, "There is no page at this address.")
        return await http_exception_handler(request, exc)

    app.include_router(api.router)
    app.include_router(workers.router)
    from .web import (  # noqa: PLC0415  (pages import templates; keep API usable without them)
        pages,
        team,  # noqa: PLC0415
        templating,
    )

    app.include_router(team.router)
    app.include_router(pages.router)
    templating.mount_static(app)
    return app
