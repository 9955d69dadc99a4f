"""How pages are rendered: the Jinja environment, the full page or its HTMX fragment, static files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ..team import auth

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"

# Pinned together by scripts/vendor-htmx, which prints both after copying the npm package's file.
HTMX_VERSION = "2.0.11"
HTMX_SRI = "sha384-2OatzQy1H+Zd/IIrjr1TcuDGqLXeHhbooAyJY1KdQMKnr4LZ22k31GBLdYKHmVjg"
HTMX_CDN = f"https://cdn.jsdelivr.net/npm/htmx.org@{HTMX_VERSION}/dist/htmx.min.js"


def _htmx(request: Request) -> dict[str, Any]:
    """The htmx <script> source: the CDN at a pinned version with SRI, or the vendored copy."""
    if request.app.state.settings.htmx_local:
        return {"htmx": {"src": "/static/vendor/htmx.min.js", "sri": None}}
    return {"htmx": {"src": HTMX_CDN, "sri": HTMX_SRI}}


_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates = Jinja2Templates(env=_env, context_processors=[_htmx, auth.template_user])


def is_fragment(request: Request) -> bool:
    """An HTMX request wants the fragment; a boosted one (a normal navigation) wants the page."""
    return request.headers.get("hx-request") == "true" and request.headers.get("hx-boosted") != "true"


def render(
    request: Request,
    page: str,
    context: dict[str, Any],
    *,
    status_code: int = 200,
    headers: dict[str, Any] | None = None,
) -> HTMLResponse:
    """`page.html`, or `_page.html` on an HTMX request; both from the same context. Sends Vary."""
    name = f"_{page}.html" if is_fragment(request) else f"{page}.html"
    response = templates.TemplateResponse(request, name, context, status_code=status_code, headers=headers)
    response.headers["Vary"] = "HX-Request"
    return response


def not_found(request: Request, what: str) -> HTMLResponse:
    return render(request, "not_found", {"what": what}, status_code=404)


def mount_static(app: FastAPI) -> None:
    """CSS, the tiny copy/grow script and the vendored htmx under /static."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
