"""Sign-in and roles (issue 13): the proxy's headers count only from trusted addresses, the admin
token (bearer or sign-in cookie), curator-only routes, optional sign-in for reading and Reproduce."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.team import auth

ROOT = Path(__file__).resolve().parent.parent
SLUG = "cross-entropy-target-out-of-range"
CURATOR = {"X-Forwarded-User": "cora", "X-Forwarded-Groups": "ml, curators"}
READER = {"X-Forwarded-User": "rex", "X-Forwarded-Groups": "ml"}
PROXY_ADDR = ("10.2.3.4", 50000)
OUTSIDER = ("203.0.113.9", 50000)


def settings(tmp: Path, **overrides) -> Settings:
    return Settings(
        **{
            "database_url": f"sqlite:///{tmp}/t.db",
            "content_dir": ROOT / "content",
            "local_workers": 0,
            "trusted_proxies": "10.0.0.0/8, 192.168.5.1",
            "admin_token": "s3cret-token",
            **overrides,
        }
    )


@pytest.fixture(scope="module")
def app(tmp_path_factory, seed_db):
    tmp = tmp_path_factory.mktemp("auth")
    seed_db(tmp / "t.db")  # content/ already synced (tests/conftest.py): the app's start-up sync is quick
    app = create_app(settings(tmp))
    with TestClient(app):  # migrate + sync once
        pass
    return app


def client(app, addr=PROXY_ADDR) -> TestClient:
    return TestClient(app, client=addr)


def test_proxy_headers_from_a_trusted_address_sign_in(app):
    with client(app) as c:
        me = c.get("/api/me", headers=CURATOR).json()["user"]
        assert me == {
            "name": "cora",
            "groups": ["curators", "ml"],
            "via": "proxy",
            "curator": True,
            "may_reproduce": True,
        }
        assert c.get("/api/team/misses", headers=CURATOR).status_code == 200
        assert c.get("/team", headers=CURATOR).status_code == 200


def test_a_header_from_an_untrusted_address_is_ignored(app):
    with client(app, OUTSIDER) as c:
        assert c.get("/api/me", headers=CURATOR).json() == {"user": None}
        r = c.get("/api/team/misses", headers=CURATOR)
        assert r.status_code == 401
        r = c.get("/team", headers=CURATOR, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/sign-in?next=%2Fteam"


def test_trust_is_by_address_and_network():
    s = Settings(trusted_proxies="10.0.0.0/8, 192.168.5.1, fd00::/8")
    assert auth.trusted(s, "10.255.0.1") and auth.trusted(s, "192.168.5.1") and auth.trusted(s, "fd00::1")
    assert not auth.trusted(s, "192.168.5.2") and not auth.trusted(s, "11.0.0.1")
    assert not auth.trusted(s, "testclient") and not auth.trusted(s, None)
    assert not auth.trusted(Settings(trusted_proxies=""), "10.0.0.1")  # not configured: never


def test_a_user_without_the_curator_group_is_forbidden(app):
    with client(app) as c:
        assert c.get("/api/me", headers=READER).json()["user"]["curator"] is False
        r = c.get("/api/team/misses", headers=READER)
        assert r.status_code == 403 and "rex is not a curator" in r.json()["detail"]


def test_admin_token_as_bearer_and_as_a_sign_in_cookie(app):
    with client(app, OUTSIDER) as c:
        assert c.get("/api/team/misses", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/api/team/misses", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
        r = c.post("/sign-in", data={"token": "wrong", "next": "/team"}, follow_redirects=False)
        assert r.status_code == 401 and "not the admin token" in r.text
        r = c.post(
            "/sign-in", data={"token": "s3cret-token", "next": "//evil.example/x"}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"] == "/"  # never off-site
        assert "s3cret-token" not in r.headers["set-cookie"]
        r = c.get("/team")
        assert r.status_code == 200 and "Signed in as" in r.text
        assert c.get("/api/team/actions").json()[0]["action"] == "signed in"
        c.post("/sign-out")
        assert c.get("/team", follow_redirects=False).status_code == 303


def test_no_admin_token_means_no_token_sign_in(tmp_path, seed_db):
    seed_db(tmp_path / "t.db")
    with TestClient(create_app(settings(tmp_path, admin_token="")), client=OUTSIDER) as c:
        assert c.post("/sign-in", data={"token": ""}).status_code == 401
        assert c.get("/api/team/misses", headers={"Authorization": "Bearer "}).status_code == 401


def test_reading_is_open_by_default(app):
    with client(app, OUTSIDER) as c:
        assert c.get("/").status_code == 200 and c.get("/api/entries").status_code == 200
        assert c.post(f"/api/entries/{SLUG}/reproduce").status_code == 202


def test_reading_can_require_sign_in(tmp_path, seed_db):
    seed_db(tmp_path / "t.db")
    with TestClient(create_app(settings(tmp_path, read_requires_sign_in=True)), client=OUTSIDER) as c:
        assert c.get("/api/entries").status_code == 401
        assert c.get("/api/search", params={"q": "IndexError"}).status_code == 401
        r = c.get(f"/e/{SLUG}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/sign-in?next=%2Fe%2F{SLUG}"
        assert c.get("/healthz").status_code == 200  # the compose health check
        assert c.get("/sign-in").status_code == 200 and c.get("/static/site.css").status_code == 200
        r = c.post("/api/worker/lease", json={})  # workers authenticate with their own token
        assert r.status_code == 401 and "worker token" in r.json()["detail"]
        assert c.get("/api/entries", headers=CURATOR).status_code == 401  # headers from outside: ignored
    with TestClient(create_app(settings(tmp_path, read_requires_sign_in=True)), client=PROXY_ADDR) as c:
        assert c.get("/api/entries", headers=READER).status_code == 200
        assert c.get(f"/e/{SLUG}", headers=READER).status_code == 200


def test_reproduce_can_require_a_signed_in_user_in_a_group(tmp_path, seed_db):
    seed_db(tmp_path / "t.db")
    s = settings(tmp_path, reproduce_requires_sign_in=True, reproduce_groups="gpu-users")
    app = create_app(s)
    with TestClient(app, client=PROXY_ADDR) as c:
        r = c.post(f"/api/entries/{SLUG}/reproduce")
        assert r.status_code == 401
        r = c.post(f"/api/entries/{SLUG}/reproduce", headers=READER)
        assert r.status_code == 403 and "rex may not Reproduce" in r.json()["detail"]
        ok = {"X-Forwarded-User": "gus", "X-Forwarded-Groups": "gpu-users"}
        assert c.post(f"/api/entries/{SLUG}/reproduce", headers=ok).status_code == 202
        assert c.post(f"/api/entries/{SLUG}/reproduce", headers=CURATOR).status_code == 202
        # the page's form: anonymous readers are sent to sign in, then back to the entry
        r = c.post(f"/e/{SLUG}/reproduce", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/sign-in?next=%2Fe%2F{SLUG}"
        r = c.post(f"/e/{SLUG}/reproduce", headers=ok, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith(f"/e/{SLUG}?run=")


def test_repeated_group_headers_count_and_a_repeated_user_header_does_not(app):
    from starlette.datastructures import Headers

    s = app.state.settings
    both = Headers(
        raw=[
            (b"x-forwarded-user", b"cora"),
            (b"x-forwarded-groups", b"ml"),
            (b"x-forwarded-groups", b"curators"),
        ]
    )
    assert auth.identify(s, "10.0.0.1", both, {}).curator(s)
    twice = Headers(raw=[(b"x-forwarded-user", b"mallory"), (b"x-forwarded-user", b"cora")])
    assert auth.identify(s, "10.0.0.1", twice, {}) is None
