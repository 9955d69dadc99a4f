"""Fixtures for the web UI tests: a fresh app per module on a temporary SQLite file, DB helpers,
and (for browser tests) a real uvicorn server in a thread plus headless Debian Chromium."""

from __future__ import annotations

import contextlib
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.content import ContentError, load_file
from app.main import create_app

from .support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, CONTENT, LiveServer, free_port


@pytest.fixture(scope="session")
def content_dir(tmp_path_factory) -> Path:
    """The real content/, copied; a file that does not load *right now* is left out with a warning.

    Others edit content/ while these tests run; a half-written entry is the content tests'
    business, not a reason for every page test to fail at startup.
    """
    dst = tmp_path_factory.mktemp("content")
    for path in sorted(CONTENT.glob("*/*.toml")):
        try:
            load_file(path, CONTENT)
        except ContentError as exc:
            with warnings.catch_warnings():  # a note in the summary, not an error (pyproject: "error")
                warnings.simplefilter("default")
                warnings.warn(f"web tests skip a content file that does not load: {exc}", stacklevel=1)
            continue
        (dst / path.parent.name).mkdir(exist_ok=True)
        shutil.copy2(path, dst / path.parent.name / path.name)
    return dst


def make_settings(tmp: Path, content: Path, seed=None, **overrides) -> Settings:
    """Settings on `{tmp}/t.db`; with `seed` (the `seed_db` fixture), a copy of a database already
    synced with content/, so the app's start-up sync only checks hashes."""
    if seed is not None:
        with contextlib.suppress(ContentError):  # content/ half-written right now: the app syncs `content`
            seed(tmp / "t.db")
    return Settings(
        **{
            "database_url": f"sqlite:///{tmp}/t.db",
            "content_dir": content,
            "htmx_local": True,
            "local_workers": 0,
            **overrides,
        }
    )


@pytest.fixture(scope="module")
def app(tmp_path_factory, content_dir, seed_db):
    return create_app(make_settings(tmp_path_factory.mktemp("web"), content_dir, seed_db))


@pytest.fixture(scope="module")
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as c:  # runs the lifespan: migrate + sync
        yield c


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("browser tests need Debian's Chromium at /usr/bin/chromium (apt-get install -y chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="browser tests need `pip install playwright`"
    )
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory, content_dir, seed_db) -> Iterator[LiveServer]:
    """A real server with one local worker (app.sandbox.agent subprocess, torch on the CPU here)."""
    pytest.importorskip("app.sandbox.agent", reason="the Reproduce path needs the sandbox worker (issue 3)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = make_settings(
        tmp_path_factory.mktemp("live"),
        content_dir,
        seed_db,
        local_workers=1,
        worker_spare=1,
        worker_concurrency=1,
    )
    with LiveServer(create_app(settings, worker_url=url), port) as server:
        yield server


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
