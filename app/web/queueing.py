"""Reproduce, for the page and the API alike: whose turn it is, queue the run, wake the workers."""

from __future__ import annotations

from anyio import from_thread
from fastapi import Request
from sqlmodel import Session

from .. import runs
from ..models import Entry, Run
from ..team import auth


class Refused(Exception):
    """The queue, or this client's share of it, is full: nothing was queued, nothing lost."""

    def __init__(self, status: int, message: str, retry_after: int):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


def client_of(request: Request) -> str:
    """Whose share of the queue a Reproduce counts against: the signed-in user, else the address."""
    user = auth.current_user(request)
    return runs.client_key(
        user=user.name if user else None, address=request.client.host if request.client else None
    )


def queue_run(request: Request, session: Session, entry: Entry) -> Run:
    """Queue a run of `entry`'s snippets for whoever sent `request`. Runs in a worker thread (sync
    routes): workers long-polling on the event loop are woken from there."""
    try:
        run = runs.create_run(
            session=session, entry=entry, settings=request.app.state.settings, client=client_of(request)
        )
    except runs.ClientQueueFull as exc:  # one client may not fill the queue for everyone
        limit = request.app.state.settings.queue_per_client
        raise Refused(
            429,
            f"You have {exc.waiting} runs waiting already, the most one person may queue (at most "
            f"{limit} per client): this one can go in once one of them has started.",
            10,
        ) from None
    except runs.QueueFull:
        raise Refused(
            503, "The run queue is full right now. Nothing was lost: try again in a few seconds.", 5
        ) from None
    from_thread.run_sync(request.app.state.queue_event.set)  # an asyncio.Event: set on the loop's thread
    return run
