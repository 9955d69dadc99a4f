"""Results from authenticated workers are still validated: the outcome contract, bounded sizes."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

SLUG = "view-non-contiguous"


@pytest.fixture(scope="module")
def client(module_db_url):  # on SQLite and on PostgreSQL (tests/conftest.py)
    from app.config import Settings
    from app.main import create_app
    from tests.conftest import ROOT

    settings = Settings(database_url=module_db_url, content_dir=ROOT / "content", local_workers=0)
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture
def leased(client):
    """A fresh run, leased by a worker: (run id, lease, auth headers)."""
    run_id = client.post(f"/api/entries/{SLUG}/reproduce").json()["id"]
    auth = {"Authorization": f"Bearer {client.app.state.local_token}"}
    lease = client.post(
        "/api/worker/lease", json={"worker": {"id": "w-test"}, "wait_s": 0}, headers=auth
    ).json()
    assert lease["run_id"] == run_id
    return run_id, lease["lease"], auth


def outcome(**over) -> dict:
    return {
        "outcome": "raised",
        "exc_type": "RuntimeError",
        "message": "view size is not compatible",
        "traceback": "Traceback ...",
        "warnings": [],
        "stdout": "",
        "stderr": "",
        "truncated": False,
        "duration_ms": 3.5,
        "device": "cpu",
        "torch_version": "2.13.0",
        "expected": True,
        "reason": "ok",
        **over,
    }


@pytest.mark.parametrize(
    "bad",
    [
        {"duration_ms": "soon"},
        {"duration_ms": -1},
        {"outcome": "exploded"},
        {"stdout": "x" * (300 * 1024)},
        {"warnings": [{"category": "UserWarning", "message": "w" * (100 * 1024)}]},
        {"warnings": [{"category": "UserWarning", "message": "w"}] * 51},
        {"extra_blob": "y" * 5000},
    ],
)
def test_worker_result_outside_the_contract_is_refused(client, leased, bad):
    run_id, lease, auth = leased
    r = client.post(
        f"/api/worker/runs/{run_id}/result",
        headers=auth,
        json={"lease": lease, "part": "broken", "result": outcome(**bad)},
    )
    assert r.status_code == 422, r.text
    assert client.get(f"/api/runs/{run_id}").json()["state"] == "running"  # nothing stored
    assert client.get(f"/e/{SLUG}").status_code == 200


def test_worker_result_with_lone_surrogates_is_stored_cleaned_and_pages_render(client, leased):
    run_id, lease, auth = leased
    body = json.dumps({"lease": lease, "part": "broken", "result": outcome()})
    body = body.replace("view size is not compatible", "bad \\ud800 text")  # what json.dumps can't write
    r = client.post(
        f"/api/worker/runs/{run_id}/result",
        headers={**auth, "content-type": "application/json"},
        content=body.encode(),
    )
    assert r.status_code == 200, r.text
    fixed = outcome(outcome="ok", exc_type=None, message=None, extra_note="fine")
    r = client.post(
        f"/api/worker/runs/{run_id}/result",
        headers=auth,
        json={"lease": lease, "part": "fixed", "result": fixed},
    )
    assert r.status_code == 200, r.text
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["state"] == "done" and run["results"]["broken"]["message"] == "bad ? text"
    assert run["results"]["fixed"]["extra_note"] == "fine"
    assert client.get(f"/e/{SLUG}").status_code == 200
    assert client.get(f"/e/{SLUG}?run={run_id}").status_code == 200
