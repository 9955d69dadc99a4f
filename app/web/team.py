"""The team's pages and API (issue 13): sign-in, feedback, and the curator's view of missed
searches, feedback and drafts. Curator routes need a signed-in user with the curator role
(`app.team.auth`); feedback is open to every reader and records who gave it when signed in."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field
from sqlmodel import Session, select

from ..models import Entry
from ..team import audit, auth, drafts, feedback, misses
from ..team.models import TeamNote
from . import markup
from .deps import SessionDep
from .templating import templates

router = APIRouter()
Curator = Annotated[auth.User, Depends(auth.require_curator)]
MaybeUser = Annotated[auth.User | None, Depends(auth.current_user)]


def _page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
    return templates.TemplateResponse(request, f"team/{name}.html", context, status_code=status_code)


def _safe_next(target: str | None) -> str:
    """Only a path on this site (never `//host` or a full URL) is a place to go back to."""
    return (
        target
        if target and target.startswith("/") and not target.startswith("//") and "\\" not in target
        else "/"
    )


# -- what other pages show ---------------------------------------------------------------------------
def entry_extras(session: Session, slug: str) -> dict[str, Any]:
    """For the entry page: the team's notes on this entry."""
    notes = session.exec(select(TeamNote).where(TeamNote.entry_slug == slug).order_by(TeamNote.path)).all()
    return {"notes": [{"html": markup.markdown(n.text), "path": n.path} for n in notes]}


# -- sign-in -----------------------------------------------------------------------------------------
@router.get("/sign-in", response_class=HTMLResponse, include_in_schema=False)
def sign_in_page(request: Request, user: MaybeUser, next: str = "/") -> HTMLResponse:
    """Who you are, and the admin-token form (teams behind a proxy sign in there)."""
    s = request.app.state.settings
    return _page(
        request,
        "sign_in",
        {
            "next": _safe_next(next),
            "error": "",
            "signed_in": user.name if user else None,
            "via": user.via if user else "",
            "token_enabled": bool(s.admin_token),
            "proxy": bool(s.trusted_proxies),
        },
    )


@router.post("/sign-in", response_class=HTMLResponse, include_in_schema=False)
def sign_in(
    request: Request,
    session: SessionDep,
    token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    s = request.app.state.settings
    if not auth.token_ok(s, token):
        return _page(
            request,
            "sign_in",
            {
                "next": _safe_next(next),
                "signed_in": None,
                "via": "",
                "token_enabled": bool(s.admin_token),
                "proxy": bool(s.trusted_proxies),
                "error": "That is not the admin token.",
            },
            status_code=401,
        )
    audit.log(session, auth.ADMIN, "signed in", "admin token", request.client.host if request.client else "")
    session.commit()
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        auth.COOKIE,
        auth.cookie_value(s.admin_token),
        max_age=30 * 86400,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/sign-out", include_in_schema=False)
def sign_out() -> Response:
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(auth.COOKIE)
    return response


# -- feedback ----------------------------------------------------------------------------------------
def _feedback_form(
    request: Request,
    session: Session,
    *,
    choice: str,
    slug: str,
    verdict: str,
    lines: str,
    comment: str,
    used: str,
    user: auth.User | None,
) -> Response:
    if choice:  # a search result's button: "slug:verdict"
        slug, _, verdict = choice.partition(":")
    if not feedback.is_verdict(verdict):
        raise HTTPException(422, "verdict must be 'solved' or 'wrong'")
    e = session.get(Entry, slug)
    if e is None:
        raise HTTPException(404, f"no entry {slug!r}")
    if choice and verdict == "wrong":  # from a search: ask which entry helped (optional) before storing
        return _page(
            request,
            "feedback_more",
            {"slug": slug, "title": e.title, "lines": lines, "entries": _entry_choices(session)},
        )
    try:
        feedback.give(
            session,
            slug=slug,
            verdict=verdict,
            paste=lines,
            comment=comment,
            used=used,
            user=user.name if user else None,
        )
    except feedback.FeedbackError as exc:
        return _page(
            request,
            "feedback_more",
            {
                "slug": slug,
                "title": e.title,
                "lines": lines,
                "error": str(exc),
                "entries": _entry_choices(session),
            },
            status_code=422,
        )
    return _page(request, "feedback_thanks", {"slug": slug, "title": e.title, "verdict": verdict})


def _entry_choices(session: Session) -> list[dict[str, Any]]:
    return [
        {"slug": s, "title": t}
        for s, t in session.exec(select(Entry.slug, Entry.title).order_by(Entry.title)).all()
    ]


@router.post("/feedback", response_class=HTMLResponse, include_in_schema=False)
def feedback_form(
    request: Request,
    session: SessionDep,
    user: MaybeUser,
    choice: Annotated[str, Form()] = "",
    slug: Annotated[str, Form()] = "",
    verdict: Annotated[str, Form()] = "",
    lines: Annotated[str, Form(max_length=20_000)] = "",
    comment: Annotated[str, Form(max_length=feedback.MAX_COMMENT)] = "",
    used: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """'This solved it' / 'wrong entry for my error' from an entry page or a search result."""
    return _feedback_form(
        request,
        session,
        choice=choice,
        slug=slug,
        verdict=verdict,
        lines=lines,
        comment=comment,
        used=used,
        user=user,
    )


class FeedbackIn(BaseModel):
    entry: str = Field(description="The entry the feedback is about (a search result or the page read).")
    verdict: Literal["solved", "wrong"] = Field(
        description="solved: it fixed the error; wrong: wrong entry for it."
    )
    q: str = Field(
        "", max_length=1_000_000, description="The search text; only its normalised error lines are kept."
    )
    comment: str = Field("", max_length=feedback.MAX_COMMENT)
    used: str | None = Field(None, description="The entry the user ended up using (with verdict 'wrong').")


class FeedbackOut(BaseModel):
    id: int
    entry: str
    verdict: str
    lines: list[str] = Field(description="The normalised error lines kept of `q` (never the raw text).")
    comment: str
    used: str | None
    user: str | None
    created_at: str


@router.post("/api/feedback", status_code=201, response_model=FeedbackOut, tags=["team"])
def feedback_api(body: FeedbackIn, session: SessionDep, user: MaybeUser) -> dict[str, Any]:
    """Say whether an entry solved your error. Shown to curators and exported; never changes ranking."""
    try:
        fb = feedback.give(
            session,
            slug=body.entry,
            verdict=body.verdict,
            paste=body.q,
            comment=body.comment,
            used=body.used,
            user=user.name if user else None,
        )
    except feedback.FeedbackError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    return feedback.public(fb)


@router.get("/api/me", tags=["team"])
def me(request: Request, user: MaybeUser) -> dict[str, Any]:
    """The signed-in user (through the trusted proxy or the admin token) and their roles, or null."""
    return {"user": user.public(request.app.state.settings) if user else None}


# -- curators ----------------------------------------------------------------------------------------
class MissOut(BaseModel):
    id: int
    template: str = Field(description="The normalised error line the misses share.")
    example: str = Field(description="The normalised error lines of the latest such search.")
    count: int
    first_seen: str
    last_seen: str
    best_slug: str | None = Field(description="The entry search offered first, without confidence.")
    draft_path: str | None
    drafted_by: str | None
    drafted_at: str | None


def _dashboard(
    request: Request,
    session: Session,
    user: auth.User,
    *,
    drafted: str = "",
    error: str = "",
    status_code: int = 200,
) -> HTMLResponse:
    s = request.app.state.settings
    return _page(
        request,
        "dashboard",
        {
            "who": user.name,
            "misses": [misses.public(m) for m in misses.listing(session, s)],
            "counts": feedback.counts(session),
            "misrouted": [feedback.public(f) for f in feedback.misrouted(session, 100)],
            "actions": [audit.public(a) for a in audit.recent(session, 30)],
            "drafted": drafted,
            "error": error,
            "team_dir": str(s.team_content_dir) if s.team_content_dir else "",
            "recording": s.record_misses,
            "retention": s.misses_retention_days,
        },
        status_code=status_code,
    )


@router.get("/team", response_class=HTMLResponse, include_in_schema=False)
def dashboard(request: Request, session: SessionDep, user: Curator, drafted: str = "") -> HTMLResponse:
    """Missed searches (most frequent first), feedback per entry, misrouted pastes, who did what."""
    return _dashboard(request, session, user, drafted=drafted)


@router.post("/team/misses/{miss_id}/draft", include_in_schema=False)
def draft_page(miss_id: int, request: Request, session: SessionDep, user: Curator) -> Response:
    try:
        path = drafts.create(session, request.app.state.settings.team_content_dir, miss_id, user.name)
    except drafts.DraftError as exc:
        return _dashboard(request, session, user, error=str(exc), status_code=409)
    rel = path.relative_to(request.app.state.settings.team_content_dir).as_posix()
    return RedirectResponse(f"/team?drafted={rel}#misses", status_code=303)


@router.get("/api/team/misses", response_model=list[MissOut], tags=["team"])
def misses_api(request: Request, session: SessionDep, user: Curator) -> list[dict[str, Any]]:
    """Searches that ended without a confident match, grouped by error template, most frequent first."""
    return [misses.public(m) for m in misses.listing(session, request.app.state.settings)]


@router.post("/api/team/misses/{miss_id}/draft", status_code=201, tags=["team"])
def draft_api(miss_id: int, request: Request, session: SessionDep, user: Curator) -> dict[str, Any]:
    """Write a draft entry file for a missed search into the team content folder's `drafts/`."""
    team_dir = request.app.state.settings.team_content_dir
    try:
        path = drafts.create(session, team_dir, miss_id, user.name)
    except drafts.DraftError as exc:
        raise HTTPException(404 if "no missed search" in str(exc) else 409, str(exc)) from None
    return {"path": path.relative_to(team_dir).as_posix(), "drafted_by": user.name}


@router.get("/api/team/feedback", tags=["team"])
def feedback_summary(session: SessionDep, user: Curator) -> dict[str, Any]:
    """Per-entry counts ('solved', 'wrong') and the misrouted pastes (normalised), newest first."""
    return {
        "entries": feedback.counts(session),
        "misrouted": [feedback.public(f) for f in feedback.misrouted(session)],
    }


@router.get("/api/team/actions", tags=["team"])
def actions(session: SessionDep, user: Curator) -> list[dict[str, Any]]:
    """Who did what, newest first: drafts created, feedback given, admin sign-ins."""
    return [audit.public(a) for a in audit.recent(session, 200)]
