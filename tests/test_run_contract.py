"""The run and outcome contract (DESIGN.md) is typed in the API: OpenAPI shows it, responses obey it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def client(tmp_path_factory, seed_db):
    from app.config import Settings
    from app.main import create_app
    from tests.conftest import ROOT

    db = seed_db(tmp_path_factory.mktemp("contract") / "pitfalls.db")  # content/ already synced
    settings = Settings(database_url=f"sqlite:///{db}", content_dir=ROOT / "content", local_workers=0)
    with TestClient(create_app(settings)) as c:
        yield c


def test_openapi_shows_the_run_and_outcome_contract(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    run = schemas["RunOut"]
    assert {"id", "entry", "state", "results", "created_at"} <= set(run["required"])
    assert run["properties"]["state"]["enum"] == ["queued", "running", "done"]
    outcome = schemas["OutcomeOut"]["properties"]
    assert outcome.keys() >= {
        "outcome",
        "exc_type",
        "message",
        "traceback",
        "warnings",
        "stdout",
        "stderr",
        "truncated",
        "duration_ms",
        "device",
        "torch_version",
        "expected",
        "reason",
    }
    assert set(outcome["outcome"]["enum"]) == {
        "raised",
        "warned",
        "ok",
        "wrong",
        "timeout",
        "crashed",
        "skipped",
    }
    paths = spec["paths"]
    for path, method in (("/api/runs/{run_id}", "get"), ("/api/entries/{slug}/reproduce", "post")):
        ok = next(iter(v for k, v in paths[path][method]["responses"].items() if k in ("200", "202")))
        assert ok["content"]["application/json"]["schema"]["$ref"].endswith("/RunOut"), path
    assert {"429", "503"} <= set(paths["/api/entries/{slug}/reproduce"]["post"]["responses"])


def test_a_queued_run_answers_in_the_contract_shape(client):
    run = client.post("/api/entries/view-non-contiguous/reproduce").json()
    assert run["state"] == "queued" and run["entry"] == "view-non-contiguous" and run["results"] == {}
    again = client.get(f"/api/runs/{run['id']}").json()
    assert again == run
