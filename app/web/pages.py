"""HTML pages (issue 4). One route, two renderings: the full page, or its fragment on an HTMX request.

Every page works with JavaScript off: search is a GET form, Reproduce a form POST that redirects
to the entry page, which refreshes itself (inside <noscript>) until the run is done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from sqlmodel import Session

from .. import runs
from ..models import Entry, Run
from ..search import QueryError
from ..team import auth, misses
from . import api, team, views
from .deps import RunId, SearcherDep, SessionDep

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"

# Pinned together by scripts/vendor-htmx, which prints both after copying the npm package's file.
HTMX_VERSION = "2.0.11"
HTMX_SRI = "sha384-2OatzQy1H+Zd/IIrjr1TcuDGqLXeHhbooAyJY1KdQMKnr4LZ22k31GBLdYKHmVjg"
HTMX_CDN = f"https://cdn.jsdelivr.net/npm/htmx.org@{HTMX_VERSION}/dist/htmx.min.js"


def _htmx(request: Request) -> dict:
    """The htmx <script> source: the CDN at a pinned version with SRI, or the vendored copy."""
    if request.app.state.settings.htmx_local:
        return {"htmx": {"src": "/static/vendor/htmx.min.js", "sri": None}}
    return {"htmx": {"src": HTMX_CDN, "sri": HTMX_SRI}}


_env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
templates = Jinja2Templates(env=_env, context_processors=[_htmx, auth.template_user])
router = APIRouter(include_in_schema=False)


def is_fragment(request: Request) -> bool:
    """An HTMX request wants the fragment; a boosted one (a normal navigation) wants the page."""
    return request.headers.get("hx-request") == "true" and request.headers.get("hx-boosted") != "true"


def render(request: Request, page: str, context: dict, *, status_code: int = 200,
           headers: dict | None = None) -> HTMLResponse:
    """`page.html`, or `_page.html` on an HTMX request; both from the same context. Sends Vary."""
    name = f"_{page}.html" if is_fragment(request) else f"{page}.html"
    response = templates.TemplateResponse(request, name, context, status_code=status_code, headers=headers)
    response.headers["Vary"] = "HX-Request"
    return response


def not_found(request: Request, what: str) -> HTMLResponse:
    return render(request, "not_found", {"what": what}, status_code=404)


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: SessionDep) -> HTMLResponse:
    """Categories, the search box, recently reproduced entries."""
    return render(request, "home", views.home(session))


def _search(request: Request, searcher, session: Session, q: str) -> HTMLResponse:
    context = {"q": q, "search": None, "error": "", "categories": []}
    status = 200
    try:
        context["search"] = views.search(searcher, q)
        context["feedback_lines"] = misses.on_search(request, q, context["search"])  # issue 13
    except QueryError as exc:
        if q.strip():  # an empty box is not an error: show the form (page) or nothing (fragment)
            context["error"] = str(exc)
            status = 413 if "larger than" in str(exc) else 422
    if q.strip() and (context["search"] is None or not context["search"]["hits"]):
        context["categories"] = views.categories(session)
    return render(request, "search", context, status_code=status)


@router.get("/search", response_class=HTMLResponse)
def search_get(request: Request, searcher: SearcherDep, session: SessionDep, q: str = "") -> HTMLResponse:
    """Search results: a full page (the no-JavaScript form), or the results list for HTMX."""
    return _search(request, searcher, session, q)


@router.post("/search", response_class=HTMLResponse)
def search_post(request: Request, searcher: SearcherDep, session: SessionDep,
                q: Annotated[str, Form()] = "") -> HTMLResponse:
    """The same, for long pastes sent as a form body (the live search posts here)."""
    return _search(request, searcher, session, q)


@router.get("/c/{name}", response_class=HTMLResponse)
def category(name: str, request: Request, session: SessionDep) -> HTMLResponse:
    """A category's entries with their summaries and verification badges."""
    data = views.category(session, name)
    if data is None:
        return not_found(request, f"There is no category “{name}”.")
    return render(request, "category", {"category": data})


@router.get("/e/{slug}", response_class=HTMLResponse)
def entry(slug: str, request: Request, session: SessionDep,
          run: Annotated[int | None, Query(description="A run of this entry to show")] = None) -> HTMLResponse:
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
    return render(request, "entry", {"entry": views.entry(session, e), "refresh_url": again,
                                     "panel": views.panel(session, slug=slug, e=e, run=shown),
                                     "team": team.entry_extras(session, slug)})


def _queue(engine, settings, slug: str, client: str) -> tuple[Entry | None, Run | None, str]:
    with Session(engine) as session:
        e = session.get(Entry, slug)
        if e is None:
            return None, None, ""
        try:
            run = runs.create_run(session=session, entry=e, settings=settings, client=client)
        except runs.ClientQueueFull as exc:
            return e, None, (f"You have {exc.waiting} runs waiting already, the most one person may queue: "
                             "this one can go in once one of them has started.")
        except runs.QueueFull:
            return e, None, "The run queue is full right now. Nothing was lost: try again in a few seconds."
        session.expunge(run)
        return e, run, ""


@router.post("/e/{slug}/reproduce", response_class=HTMLResponse)
async def reproduce(slug: str, request: Request) -> Response:
    """Queue a run; HTMX gets the self-polling panel, a plain form POST a 303 to the entry page."""
    if (denied := auth.reproduce_denied(request)) is not None:  # sign-in for Reproduce, when set
        return denied
    state = request.app.state
    e, run, message = await run_in_threadpool(_queue, state.engine, state.settings, slug, api.run_client(request))
    if e is None:
        return not_found(request, f"There is no entry “{slug}”.")
    if run is None:  # the queue (or this client's share) is full: say so, with Retry-After, instead of failing
        status = 429 if message.startswith("You have") else 503
        return await run_in_threadpool(_queue_full, request, slug, message, status)
    state.queue_event.set()  # wake long-polling workers (on the event loop's thread: asyncio.Event)
    if not is_fragment(request):
        return RedirectResponse(f"/e/{slug}?run={run.id}#reproduce", status_code=303)
    return await run_in_threadpool(_run_panel, request, run.id, 202)


def _queue_full(request: Request, slug: str, message: str, status: int = 503) -> HTMLResponse:
    with Session(request.app.state.engine) as session:
        e = session.get(Entry, slug)
        context = {"panel": views.panel(session, slug=slug, e=e, message=message)}
        if not is_fragment(request):
            context |= {"entry": views.entry(session, e), "refresh_url": f"/e/{slug}"}
        return render(request, "entry" if not is_fragment(request) else "run", context, status_code=status,
                      headers={"Retry-After": "5" if status == 503 else "10"})


def _run_panel(request: Request, run_id: int, status_code: int = 200) -> HTMLResponse:
    with Session(request.app.state.engine) as session:
        run = session.get(Run, run_id)
        if run is None:
            return not_found(request, f"There is no run {run_id}.")
        e = session.get(Entry, run.entry_slug)
        context = {"panel": views.panel(session, slug=run.entry_slug, e=e, run=run),
                   "title": e.title if e else run.entry_slug}
        if e is not None and run.state == "done" and is_fragment(request):
            context["oob_badge"] = views.badge(e, runs.latest_results(session=session, entry=e))
        return render(request, "run", context, status_code=status_code)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: RunId, request: Request) -> HTMLResponse:
    """A run's panel: the fragment htmx polls, or a small page that refreshes itself until done."""
    return _run_panel(request, run_id)


def mount_static(app: FastAPI) -> None:
    """CSS, the tiny copy/grow script and the vendored htmx under /static."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
