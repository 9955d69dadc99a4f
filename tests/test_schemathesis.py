"""Property-based fuzzing of the JSON API from its own OpenAPI schema: no input gives a 5xx."""

from __future__ import annotations

import tempfile

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from app import content  # noqa: E402
from app.config import Settings  # noqa: E402
from app.db import make_engine, migrate  # noqa: E402
from app.main import create_app  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

# schemathesis collects at import time, so the app (on its own temporary database) is built here
_settings = Settings(
    database_url=f"sqlite:///{tempfile.mkdtemp(prefix='pitfalls-fuzz-')}/fuzz.db",
    content_dir=ROOT / "content",
    local_workers=0,
    queue_max=10_000,
    sync_on_start=False,
)
migrate(_settings)
_engine = make_engine(_settings)
content.sync(_engine, _settings.content_dir)
_engine.dispose()
app = create_app(_settings)
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_never_answers_5xx(case):
    response = case.call()
    assert response.status_code < 500, (
        f"{case.method} {case.path}: {response.status_code} {response.text[:300]}"
    )
