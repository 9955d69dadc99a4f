"""Who is asking, and what they may do.

Two ways to be signed in:

- **An authenticating reverse proxy** (oauth2-proxy, Pomerium, Authelia...) in front of the app sets
  `X-Forwarded-User` and `X-Forwarded-Groups`. Those headers are believed only on connections from
  `trusted_proxies` (addresses or CIDRs): anyone else could send them too.
- **The admin token** (small teams without a proxy): `Authorization: Bearer <token>` on the API, or
  the sign-in form, which sets a cookie holding an HMAC of the token (never the token itself).

Roles: *curator* (members of `curator_groups`, and the admin) sees missed searches and feedback and
creates drafts; Reproduce may need a signed-in user in `reproduce_groups` (or a curator); reading may
need any signed-in user. Everything else stays open, as before.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import Settings

COOKIE = "pitfalls_admin"
ADMIN = "admin"
# Paths that stay open when reading needs sign-in: the sign-in page itself, assets, the health check
# the compose file polls, and the worker protocol (workers authenticate with their own token).
OPEN_PATHS = ("/sign-in", "/sign-out", "/static/", "/healthz", "/api/worker/")


def split(csv: str) -> list[str]:
    """A comma-separated setting as a list (blanks dropped)."""
    return [p.strip() for p in csv.split(",") if p.strip()]


@lru_cache(maxsize=32)
def _networks(csv: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(p, strict=False) for p in split(csv))


def trusted(settings: Settings, host: str | None) -> bool:
    """Is the connection's peer one of the configured proxies?"""
    if not host or not settings.trusted_proxies:
        return False
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(addr in net for net in _networks(settings.trusted_proxies))


@dataclass(frozen=True)
class User:
    name: str
    groups: frozenset[str] = field(default_factory=frozenset)
    via: str = "proxy"  # proxy | token

    def curator(self, settings: Settings) -> bool:
        return self.via == "token" or bool(self.groups & set(split(settings.curator_groups)))

    def may_reproduce(self, settings: Settings) -> bool:
        allowed = set(split(settings.reproduce_groups))
        return self.curator(settings) or not allowed or bool(self.groups & allowed)

    def public(self, settings: Settings) -> dict[str, Any]:
        return {
            "name": self.name,
            "groups": sorted(self.groups),
            "via": self.via,
            "curator": self.curator(settings),
            "may_reproduce": self.may_reproduce(settings),
        }


def cookie_value(token: str) -> str:
    """What the sign-in cookie holds: an HMAC of the admin token, so the cookie never is the token."""
    return hmac.new(token.encode(), b"pitfalls admin session", hashlib.sha256).hexdigest()


def token_ok(settings: Settings, token: str) -> bool:
    return bool(settings.admin_token) and secrets.compare_digest(
        token.encode(), settings.admin_token.encode()
    )


def _values(headers: Headers | Mapping[str, str], name: str) -> list[str]:
    """Every value of a header (a Starlette `Headers` keeps repeated ones; a dict has one)."""
    if isinstance(headers, Headers):
        return headers.getlist(name)
    return [headers[name]] if headers.get(name) is not None else []


def identify(
    settings: Settings, peer: str | None, headers: Headers | Mapping[str, str], cookies: Mapping[str, str]
) -> User | None:
    """The signed-in user of a request, or None (anonymous)."""
    if trusted(settings, peer):
        names = _values(headers, settings.user_header)
        # one user, or none: several values mean the header was not the proxy's alone (fail closed)
        if len(names) == 1 and (name := names[0].strip()):
            # proxies send groups comma-separated on one line or as repeated headers (oauth2-proxy)
            groups = frozenset(split(",".join(_values(headers, settings.groups_header))))
            return User(name[:200], groups, "proxy")
    if settings.admin_token:
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and token_ok(settings, token):
            return User(ADMIN, frozenset(), "token")
        cookie = cookies.get(COOKIE) or ""
        if cookie and secrets.compare_digest(cookie.encode(), cookie_value(settings.admin_token).encode()):
            return User(ADMIN, frozenset(), "token")
    return None


def current_user(request: Request) -> User | None:
    """Request dependency: the signed-in user or None. The peer is the socket's address."""
    return identify(
        request.app.state.settings,
        request.client.host if request.client else None,
        request.headers,
        request.cookies,
    )


def wants_page(request: Request) -> bool:
    return not request.url.path.startswith("/api/")


def _sign_in_redirect(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/sign-in?next={quote(target, safe='')}", status_code=303)


def require_curator(request: Request) -> User:
    """Dependency of the curator routes: 401 without a user, 403 without the role (pages redirect
    to the sign-in page instead of a 401)."""
    user = current_user(request)
    settings = request.app.state.settings
    if user is None:
        if wants_page(request):
            raise HTTPException(
                303, "sign in first", headers={"Location": _sign_in_redirect(request).headers["location"]}
            )
        raise HTTPException(
            401,
            "sign in as a curator (through the team's proxy, or with the admin token)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not user.curator(settings):
        raise HTTPException(
            403, f"{user.name} is not a curator (curator groups: {settings.curator_groups or 'none'})"
        )
    return user


def reproduce_denied(request: Request) -> Response | None:
    """None when this request may queue a run; else the answer to give (a sign-in redirect for a
    page, 401/403 JSON for the API)."""
    settings = request.app.state.settings
    if not settings.reproduce_requires_sign_in:
        return None
    user = current_user(request)
    if user is not None and user.may_reproduce(settings):
        return None
    if user is None:
        if wants_page(request):
            slug_page = request.url.path.removesuffix("/reproduce")
            return RedirectResponse(f"/sign-in?next={quote(slug_page, safe='')}", status_code=303)
        return JSONResponse(
            {"detail": "Reproduce needs a signed-in user"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    return JSONResponse(
        {"detail": f"{user.name} may not Reproduce (groups allowed: {settings.reproduce_groups})"},
        status_code=403,
    )


class ReadGate:
    """With `read_requires_sign_in`, every page and API call but OPEN_PATHS needs a signed-in user:
    pages redirect to the sign-in page, the API answers 401."""

    def __init__(self, app: ASGIApp, *, settings: Settings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not self.settings.read_requires_sign_in
            or scope["path"].startswith(OPEN_PATHS)
        ):
            return await self.app(scope, receive, send)
        request = Request(scope)
        if current_user(request) is None:
            response = (
                _sign_in_redirect(request)
                if wants_page(request)
                else JSONResponse(
                    {"detail": "sign in first"}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
            )
            return await response(scope, receive, send)
        await self.app(scope, receive, send)


def template_user(request: Request) -> dict[str, Any]:
    """Jinja context processor: the signed-in user (or None) and whether they curate."""
    user = current_user(request)
    settings = request.app.state.settings
    return {
        "user": user.name if user else None,
        "curator": bool(user and user.curator(settings)),
        "sign_in_offered": bool(settings.admin_token or settings.trusted_proxies),
    }
