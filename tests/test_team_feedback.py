"""Feedback (issue 13): 'this solved it' / 'wrong entry for my error', counted per entry, never a
raw paste, and exported as evaluation cases that `pitfalls eval` accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.config import Settings
from app.evaluate import load_cases
from app.main import create_app

ROOT = Path(__file__).resolve().parent.parent
SLUG = "cross-entropy-target-out-of-range"
OTHER = "view-non-contiguous"
PASTE = """Traceback (most recent call last):
  File "/home/mirelle/seg/train.py", line 71, in main
    loss = criterion(logits, labels)
IndexError: Target 11 is out of bounds.
"""
AUTH = {"Authorization": "Bearer tok"}
PROXY = {"X-Forwarded-User": "ana@corp", "X-Forwarded-Groups": "ml"}


@pytest.fixture(scope="module")
def client(tmp_path_factory, seed_db):
    tmp = tmp_path_factory.mktemp("feedback")
    seed_db(tmp / "t.db")  # content/ already synced (tests/conftest.py): the app's start-up sync is quick
    settings = Settings(
        database_url=f"sqlite:///{tmp}/t.db",
        content_dir=ROOT / "content",
        local_workers=0,
        admin_token="tok",
        trusted_proxies="10.0.0.0/8",
    )
    with TestClient(create_app(settings), client=("10.0.0.7", 40000)) as c:
        c.env = {
            "PITFALLS_DATABASE_URL": settings.database_url,
            "PITFALLS_CONTENT_DIR": str(ROOT / "content"),
        }
        yield c


def test_feedback_keeps_the_normalised_lines_and_who_gave_it(client):
    r = client.post(
        "/api/feedback",
        json={"entry": SLUG, "verdict": "wrong", "q": PASTE, "used": OTHER, "comment": "my labels were fine"},
        headers=PROXY,
    )
    assert r.status_code == 201, r.text
    fb = r.json()
    assert fb["lines"] == ["IndexError: Target _num_ is out of bounds."]
    assert fb["user"] == "ana@corp" and fb["used"] == OTHER and fb["comment"] == "my labels were fine"
    assert "mirelle" not in json.dumps(client.get("/api/team/feedback", headers=AUTH).json())
    acted = client.get("/api/team/actions", headers=AUTH).json()[0]
    assert (acted["user"], acted["action"], acted["target"]) == ("ana@corp", "feedback: wrong", SLUG)


def test_feedback_from_an_anonymous_reader_and_an_entry_page(client):
    assert client.post("/api/feedback", json={"entry": SLUG, "verdict": "solved"}).json()["user"] is None
    r = client.post("/feedback", data={"slug": SLUG, "verdict": "solved"})  # the entry page's form
    assert r.status_code == 200 and "solved it" in r.text
    r = client.post(
        "/api/feedback",
        json={
            "entry": OTHER,
            "verdict": "wrong",
            "q": "RuntimeError: view size is not compatible with input tensor's size and stride",
        },
    )
    assert r.status_code == 201


def test_unknown_entries_are_refused(client):
    assert (
        client.post("/api/feedback", json={"entry": "no-such-entry", "verdict": "solved"}).status_code == 404
    )
    r = client.post("/api/feedback", json={"entry": SLUG, "verdict": "wrong", "used": "no-such-entry"})
    assert r.status_code == 422 and "no-such-entry" in r.json()["detail"]
    assert client.post("/api/feedback", json={"entry": SLUG, "verdict": "meh"}).status_code == 422


def test_curators_see_counts_and_misrouted_pastes(client):
    assert client.get("/api/team/feedback").status_code == 401
    data = client.get("/api/team/feedback", headers=AUTH).json()
    counts = {c["slug"]: (c["solved"], c["wrong"]) for c in data["entries"]}
    assert counts[SLUG] == (2, 1) and counts[OTHER] == (0, 1)
    assert [m["entry"] for m in data["misrouted"]] == [OTHER, SLUG]  # newest first


def test_feedback_does_not_change_ranking(client):
    r = client.get("/api/search", params={"q": "IndexError: Target 11 is out of bounds."}).json()
    assert r["confident"] and r["results"][0]["slug"] == SLUG


def test_export_is_accepted_by_pitfalls_eval(client, tmp_path):
    out = tmp_path / "misrouted.jsonl"
    runner = CliRunner()
    r = runner.invoke(cli, ["feedback", "--export", str(out)], env=client.env)
    assert r.exit_code == 0, r.output
    assert "wrote 2 misrouted pastes" in r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {tuple(row["ok"]) for row in rows} == {(OTHER,), ()}
    assert all(set(row) >= {"id", "text", "ok", "source"} for row in rows)
    cases = load_cases([out])
    assert [c.text for c in cases] == [
        "IndexError: Target _num_ is out of bounds.",
        "RuntimeError: view size is not compatible with input tensor's size and stride",
    ]
    r = runner.invoke(cli, ["eval", str(out), "--json"], env=client.env)
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["figures"]["cases"] == 2 and report["unknown_slugs"] == {}
    # the case the user says search got wrong is counted as a miss: it now answers SLUG, not OTHER
    assert any(m["ok"] == [OTHER] and m["got"][0] == SLUG for m in report["misses"])
    r = runner.invoke(cli, ["feedback"], env=client.env)
    assert r.exit_code == 0 and SLUG in r.output


def test_team_endpoints_are_in_the_openapi_schema(client):
    paths = client.get("/openapi.json").json()["paths"]
    for path, method in [
        ("/api/feedback", "post"),
        ("/api/me", "get"),
        ("/api/team/misses", "get"),
        ("/api/team/misses/{miss_id}/draft", "post"),
        ("/api/team/feedback", "get"),
        ("/api/team/actions", "get"),
    ]:
        assert method in paths[path] and paths[path][method]["tags"] == ["team"], path
    assert "/team" not in paths and "/feedback" not in paths  # pages stay out of the API
