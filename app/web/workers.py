"""The worker protocol: workers (local or remote) lease runs, heartbeat, and post results."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlmodel import Session

from .. import runs
from ..models import Run
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


EXTRA_FIELDS, EXTRA_BYTES = 30, 4096
TEXT_MAX = 256 * 1024  # one stream or message; the sandbox's own cap is lower (run_max_output_bytes)
Name = Annotated[str, Field(max_length=500)]


def _clean(value: Any) -> Any:
    """Lone surrogates (`\ud800`) from a snippet's output can't be stored or shown: replace them."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


class WarningOut(BaseModel):
    category: Name = "Warning"
    names: list[Name] = Field(default_factory=list, max_length=50)
    message: str = Field("", max_length=16 * 1024)
    line: int | None = Field(None, ge=0, le=10**9)


class OutcomeIn(BaseModel):
    """One snippet's OUTCOME as a worker reports it: the run-result contract, with bounded sizes.

    An authenticated worker is still not trusted to send something every page can render.
    """

    model_config = ConfigDict(extra="allow")

    outcome: Literal["raised", "warned", "ok", "wrong", "timeout", "crashed", "skipped"]
    exc_type: Name | None = None
    exc_names: list[Name] = Field(default_factory=list, max_length=50)
    message: str | None = Field(None, max_length=TEXT_MAX)
    traceback: str | None = Field(None, max_length=TEXT_MAX)
    warnings: list[WarningOut] = Field(default_factory=list, max_length=50)
    stdout: str = Field("", max_length=TEXT_MAX)
    stderr: str = Field("", max_length=TEXT_MAX)
    truncated: bool = False
    duration_ms: float = Field(0, ge=0, le=10**9, allow_inf_nan=False)
    device: Name | None = None
    torch_version: Name | None = None
    expected: bool | None = None
    reason: str | None = Field(None, max_length=16 * 1024)

    @model_validator(mode="before")
    @classmethod
    def _sanitise(cls, data: Any) -> Any:
        return _clean(data)

    @model_validator(mode="after")
    def _small_extras(self) -> OutcomeIn:
        # extra facts (wall_ms, the limits that applied, the sandbox pid) are welcome, but small
        extra = self.model_extra or {}
        if len(extra) > EXTRA_FIELDS or any(
            len(json.dumps(v, default=str)) > EXTRA_BYTES for v in extra.values()
        ):
            raise ValueError(
                f"extra outcome fields: at most {EXTRA_FIELDS}, each at most {EXTRA_BYTES} bytes of JSON"
            )
        return self


class ResultBody(LeaseRef):
    part: Literal["broken", "fixed"]
    result: OutcomeIn


def _try_lease(request: Request, info: WorkerInfo) -> dict[str, Any] | None:
    settings = request.app.state.settings
    with Session(request.app.state.engine) as session:
        worker = runs.see_worker(session=session, info=info.model_dump())
        run = runs.lease_run(session=session, worker=worker, settings=settings)
        if run is None:
            return None
        return {
            "run_id": run.id,
            "lease": run.lease,
            "lease_s": settings.lease_s,
            "entry": run.entry_slug,
            **{k: run.job[k] for k in ("requires", "fresh_process", "limits", "snippets")},
        }


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


def _leased_call(request: Request, fn: Callable[..., Run], **kwargs: Any) -> dict[str, Any]:
    with Session(request.app.state.engine) as session:
        try:
            run = fn(session=session, settings=request.app.state.settings, **kwargs)
        except runs.LeaseLost as exc:
            raise HTTPException(409, str(exc)) from None
        return {"id": run.id, "state": run.state}


@router.post("/runs/{run_id}/heartbeat")
def heartbeat(run_id: RunId, body: LeaseRef, request: Request) -> dict[str, Any]:
    """Keep a lease alive while the snippets run."""
    return _leased_call(request, runs.heartbeat, run_id=run_id, lease=body.lease)


@router.post("/runs/{run_id}/result")
def result(run_id: RunId, body: ResultBody, request: Request) -> dict[str, Any]:
    """Post one part's outcome (broken or fixed)."""
    return _leased_call(
        request,
        runs.submit_result,
        run_id=run_id,
        lease=body.lease,
        part=body.part,
        result=body.result.model_dump(),
    )
