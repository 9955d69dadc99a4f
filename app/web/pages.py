"""HTML pages (issue 4). One route, two renderings: the full page, or its fragment on an HTMX request.

Every page works with JavaScript off: search is a GET form, Reproduce a form POST that redirects
to the entry page, which refreshes itself (inside <noscript>) until the run is done.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from .. import runs
from ..models import Entry, Run
from ..search import QueryError, Searcher
from ..team import auth, misses
from . import page_data, queueing, team
from .deps import RunId, SearcherDep, SessionDep
from .templating import is_fragment, not_found, render

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: SessionDep) -> HTMLResponse:
    """Categories, the search box, recently reproduced entries."""
    return render(request, "home", page_data.home(session))


def _search(request: Request, searcher: Searcher, session: Session, q: str) -> HTMLResponse:
    context: dict[str, Any] = {"q": q, "search": None, "error": "", "categories": []}
    status = 200
    try:
        context["search"] = page_data.search(searcher, q)
        context["feedback_lines"] = misses.on_search(request, q, context["search"])  # issue 13
    except QueryError as exc:
        if q.strip():  # an empty box is not an error: show the form (page) or nothing (fragment)
            context["error"] = str(exc)
            status = 413 if "larger than" in str(exc) else 422
    if q.strip() and (context["search"] is None or not context["search"]["hits"]):
        context["categories"] = page_data.categories(session)
    return render(request, "search", context, status_code=status)


@router.get("/search", response_class=HTMLResponse)
def search_get(request: Request, searcher: SearcherDep, session: SessionDep, q: str = "") -> HTMLResponse:
    """Search results: a full page (the no-JavaScript form), or the results list for HTMX."""
    return _search(request, searcher, session, q)


@router.post("/search", response_class=HTMLResponse)
def search_post(
    request: Request, searcher: SearcherDep, session: SessionDep, q: Annotated[str, Form()] = ""
) -> HTMLResponse:
    """The same, for long pastes sent as a form body (the live search posts here)."""
    return _search(request, searcher, session, q)


@router.get("/c/{name}", response_class=HTMLResponse)
def category(name: str, request: Request, session: SessionDep) -> HTMLResponse:
    """A category's entries with their summaries and verification badges."""
    data = page_data.category(session, name)
    if data is None:
        return not_found(request, f"There is no category “{name}”.")
    return render(request, "category", {"category": data})


@router.get("/e/{slug}", response_class=HTMLResponse)
def entry(
    slug: str,
    request: Request,
    session: SessionDep,
    searcher: SearcherDep,
    run: Annotated[int | None, Query(description="A run of this entry to show")] = None,
) -> HTMLResponse:
    """An entry: the error, the fix, both snippets side by side, outcomes and Reproduce."""
    e = session.get(Entry, slug)
    if e is None:
        return not_found(request, f"There is no entry “{slug}”.")
    shown = session.get(Run, run) if run is not None and 0 < run < 2**63 else None  # SQLite ids are int64
    if shown is not None and shown.entry_slug != slug:
        shown = None
    # Without JavaScript the page refreshes itself while the run is pending. A refresh to the same
    # URL with a #fragment is only a scroll (a fragment navigation), so alternate between two URLs.
    again = f"/e/{slug}?run={run}{'' if 'wait' in request.query_params else '&wait=1'}#reproduce"
    return render(
        request,
        "entry",
        {
            "entry": page_data.entry(session, e, searcher),
            "refresh_url": again,
            "panel": page_data.panel(session, slug=slug, e=e, run=shown),
            "team": team.entry_extras(session, slug),
        },
    )


@router.post("/e/{slug}/reproduce", response_class=HTMLResponse)
def reproduce(slug: str, request: Request, session: SessionDep, searcher: SearcherDep) -> Response:
    """Queue a run; HTMX gets the self-polling panel, a plain form POST a 303 to the entry page."""
    if (denied := auth.reproduce_denied(request)) is not None:  # sign-in for Reproduce, when set
        return denied
    e = session.get(Entry, slug)
    if e is None:
        return not_found(request, f"There is no entry “{slug}”.")
    try:
        run = queueing.queue_run(request, session, e)
    except queueing.Refused as exc:  # the queue (or this client's share) is full: say so, with Retry-After
        context: dict[str, Any] = {"panel": page_data.panel(session, slug=slug, e=e, message=exc.message)}
        if not is_fragment(request):
            context |= {"entry": page_data.entry(session, e, searcher), "refresh_url": f"/e/{slug}"}
        return render(
            request,
            "run" if is_fragment(request) else "entry",
            context,
            status_code=exc.status,
            headers=exc.headers,
        )
    if not is_fragment(request):
        return RedirectResponse(f"/e/{slug}?run={run.id}#reproduce", status_code=303)
    return _run_panel(request, session, run, 202)


def _run_panel(request: Request, session: Session, run: Run, status_code: int = 200) -> HTMLResponse:
    e = session.get(Entry, run.entry_slug)
    context = {
        "panel": page_data.panel(session, slug=run.entry_slug, e=e, run=run),
        "title": e.title if e else run.entry_slug,
    }
    if e is not None and run.state == "done" and is_fragment(request):
        context["oob_badge"] = page_data.badge(e, runs.latest_results(session=session, entry=e))
    return render(request, "run", context, status_code=status_code)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: RunId, request: Request, session: SessionDep) -> HTMLResponse:
    """A run's panel: the fragment htmx polls, or a small page that refreshes itself until done."""
    run = session.get(Run, run_id)
    if run is None:
        return not_found(request, f"There is no run {run_id}.")
    return _run_panel(request, session, run)
