"""Every request's guard: oversized bodies refused unread, cross-site posts refused, security headers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.main import create_app

from .conftest import make_settings
from .support import SLUG


@pytest.fixture(scope="module")
def small(tmp_path_factory, content_dir, seed_db) -> Iterator[TestClient]:
    app = create_app(
        make_settings(tmp_path_factory.mktemp("guard"), content_dir, seed_db, max_body_bytes=10_000)
    )
    with TestClient(app) as c:
        yield c


def _runs(client: TestClient) -> int:
    with client.app.state.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM run")).scalar_one()


def test_body_over_the_cap_is_refused_before_it_is_read(small):
    r = small.post(
        "/api/search",
        content=b'{"q": "' + b"x" * 20_000 + b'"}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413 and "10000 bytes" in r.json()["detail"]


def test_chunked_body_over_the_cap_is_refused(small):
    def chunks():
        yield b'{"q": "'
        for _ in range(30):
            yield b"y" * 1000
        yield b'"}'

    r = small.post("/api/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_chunked_body_under_the_cap_reaches_the_app(small):
    def chunks():
        yield b'{"q": "RuntimeError: view size is not compatible with input '
        yield b"tensor's size and stride\"}"

    r = small.post("/api/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["results"]


@pytest.mark.parametrize(
    "headers",
    [
        {"sec-fetch-site": "cross-site"},
        {"origin": "https://evil.example"},
        {"origin": "null"},
    ],
)
def test_cross_site_reproduce_is_refused_and_creates_no_run(small, headers):
    before = _runs(small)
    assert small.post(f"/e/{SLUG}/reproduce", headers=headers, follow_redirects=False).status_code == 403
    assert small.post(f"/api/entries/{SLUG}/reproduce", headers=headers).status_code == 403
    assert _runs(small) == before


def test_same_origin_and_cli_reproduce_pass(small):
    r = small.post(
        f"/api/entries/{SLUG}/reproduce",
        headers={"origin": "http://testserver", "sec-fetch-site": "same-origin"},
    )
    assert r.status_code == 202
    assert (
        small.post(f"/api/entries/{SLUG}/reproduce").status_code == 202
    )  # curl, the CLI: no browser headers


def test_security_headers_on_pages_and_api(small):
    for path in ("/", f"/e/{SLUG}", "/api/categories"):
        r = small.get(path)
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp
        assert "script-src 'self';" in csp  # htmx is served from here by default
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "same-origin"


def test_pages_and_api_docs_load_nothing_from_a_cdn(small):
    page = small.get("/").text
    assert 'src="/static/vendor/htmx.min.js"' in page and "cdn." not in page
    docs = small.get("/docs")
    assert docs.status_code == 200 and "cdn." not in docs.text and "swagger-ui-bundle.js" in docs.text
    asset = docs.text.split('src="')[1].split('"')[0]
    assert small.get(asset).status_code == 200  # the Swagger UI bundle comes from this server
