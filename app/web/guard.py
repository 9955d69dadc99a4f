"""What every request and response passes through: a body cap, cross-site refusal, security headers.

A pure ASGI middleware, so an oversized body is refused before anything reads it into memory.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
# the API docs page (Swagger UI / ReDoc, served from this server) needs its inline bootstrap script
DOCS = ("/docs", "/redoc")


def content_security_policy(script_hosts: str = "", *, docs: bool = False) -> str:
    inline = " 'unsafe-inline'" if docs else ""
    return (
        f"default-src 'self'; script-src 'self'{inline}{script_hosts}; style-src 'self'{inline}; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


class Guard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, script_hosts: str = ""):
        self.app = app
        self.max_body = max_body_bytes
        self.csp = content_security_policy(script_hosts)
        self.csp_docs = content_security_policy(script_hosts, docs=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path = scope["path"]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                csp = self.csp_docs if path.startswith(DOCS) else self.csp
                extra = [
                    (b"content-security-policy", csp.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin"),
                ]
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        if scope["method"] in UNSAFE:
            if problem := cross_site(headers):
                return await refuse(send_with_headers, 403, problem)
            declared = headers.get("content-length")
            if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
                return await refuse(
                    send_with_headers, 413, f"the request body is larger than {self.max_body} bytes"
                )
            if declared is None:  # chunked: read at most the cap, then hand the app what was read
                body, more = b"", True
                while more:
                    message = await receive()
                    if message["type"] != "http.request":
                        return
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > self.max_body:
                        return await refuse(
                            send_with_headers, 413, f"the request body is larger than {self.max_body} bytes"
                        )
                receive = replay(body, receive)
        await self.app(scope, receive, send_with_headers)


def cross_site(headers: dict[str, str]) -> str | None:
    """A browser on another site posting here (a form, `fetch(no-cors)`): refused. CLIs and workers
    send neither header and pass; workers also authenticate with their token."""
    if headers.get("sec-fetch-site") == "cross-site":
        return "cross-site requests are refused"
    origin = headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != headers.get("host", ""):
        return "cross-origin requests are refused"
    if origin == "null":
        return "requests from an opaque origin are refused"
    return None


def replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, then the real channel (which reports the client's disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
