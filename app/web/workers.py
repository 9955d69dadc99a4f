"""The worker protocol: workers (local or remote) lease runs, heartbeat, and post results."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field
from sqlmodel import Session

from .. import runs
from .deps import RunId, WorkerAuth

router = APIRouter(prefix="/api/worker", tags=["workers"], dependencies=[WorkerAuth])


class WorkerInfo(BaseModel):
    id: str = Field(max_length=200)
    device: str = "unknown"
    torch_version: str = "unknown"
    gpus: int = 0
    hostname: str = ""
    concurrency: int = 1


class LeaseBody(BaseModel):
    worker: WorkerInfo
    wait_s: float = Field(20, ge=0, le=60, description="Long-poll: wait this long for a job.")


class LeaseRef(BaseModel):
    lease: str


class ResultBody(LeaseRef):
    part: Literal["broken", "fixed"]
    result: dict[str, Any]


def _try_lease(request: Request, info: WorkerInfo) -> dict | None:
    settings = request.app.state.settings
    with Session(request.app.state.engine) as session:
        worker = runs.see_worker(session=session, info=info.model_dump())
        run = runs.lease_run(session=session, worker=worker, settings=settings)
        if run is None:
            return None
        return {"run_id": run.id, "lease": run.lease, "lease_s": settings.lease_s, "entry": run.entry_slug,
                **{k: run.job[k] for k in ("requires", "fresh_process", "limits", "snippets")}}


@router.post("/lease", responses={204: {"description": "No job within wait_s; lease again."}})
async def lease(body: LeaseBody, request: Request) -> Any:
    """Long-poll for the next run this worker should do."""
    deadline = time.monotonic() + body.wait_s
    event: asyncio.Event = request.app.state.queue_event
    while True:
        # a worker that went away mid-poll must not be handed a run it will never see
        if await request.is_disconnected():
            return Response(status_code=204)
        job = await run_in_threadpool(_try_lease, request, body.worker)
        if job is not None:
            return job
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Response(status_code=204)
        event.clear()
        try:  # woken by a new run, or poll again in a second (leases of dead workers expire)
            await asyncio.wait_for(event.wait(), timeout=min(remaining, 1.0))
        except TimeoutError:
            pass


def _leased_call(request: Request, fn, **kwargs) -> dict:
    with Session(request.app.state.engine) as session:
        try:
            run = fn(session=session, settings=request.app.state.settings, **kwargs)
        except runs.LeaseLost as exc:
            raise HTTPException(409, str(exc)) from None
        return {"id": run.id, "state": run.state}


@router.post("/runs/{run_id}/heartbeat")
def heartbeat(run_id: RunId, body: LeaseRef, request: Request) -> dict:
    """Keep a lease alive while the snippets run."""
    return _leased_call(request, runs.heartbeat, run_id=run_id, lease=body.lease)


@router.post("/runs/{run_id}/result")
def result(run_id: RunId, body: ResultBody, request: Request) -> dict:
    """Post one part's outcome (broken or fixed)."""
    return _leased_call(request, runs.submit_result, run_id=run_id, lease=body.lease, part=body.part,
                        result=body.result)
