"""Issue 10 item 5, through the app: one client cannot monopolise the run queue (both backends)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

ENTRIES = ["view-non-contiguous", "nan-loss", "linear-in-features-mismatch", "broadcast-size-mismatch"]


@pytest.fixture(scope="module")
def app(module_db_url):
    from app.config import Settings
    from app.main import create_app
    from tests.conftest import ROOT

    settings = Settings(
        database_url=module_db_url,
        content_dir=ROOT / "content",
        local_workers=0,
        queue_max=10,
        queue_per_client=2,
    )
    application = create_app(settings)
    with TestClient(application):  # runs the lifespan (migrate, sync) once
        yield application


def test_one_address_gets_its_share_then_429_others_still_get_in(app):
    greedy = TestClient(app, client=("10.0.0.1", 40000))
    codes = [greedy.post(f"/api/entries/{slug}/reproduce").status_code for slug in ENTRIES[:2]]
    assert codes == [202, 202]
    refused = greedy.post(f"/api/entries/{ENTRIES[2]}/reproduce")
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert "at most 2 per client" in refused.json()["detail"]
    # an identical waiting run is shared, not refused
    assert greedy.post(f"/api/entries/{ENTRIES[0]}/reproduce").status_code == 202
    # the page's Reproduce says so in words, with the same status
    page = greedy.post(f"/e/{ENTRIES[3]}/reproduce", follow_redirects=False)
    assert page.status_code == 429 and "You have 2 runs waiting already" in page.text
    # someone else is not held back by the greedy client
    other = TestClient(app, client=("10.0.0.2", 40000))
    assert other.post(f"/api/entries/{ENTRIES[2]}/reproduce").status_code == 202
