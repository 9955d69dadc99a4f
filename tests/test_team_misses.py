"""Missed searches (issue 13): recorded as normalised error lines only, grouped by template,
pruned after the retention period, listed most frequent first, turned into draft entry files."""

from __future__ import annotations

import json
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text, update
from sqlmodel import Session
from typer.testing import CliRunner

from app import content
from app.cli import cli
from app.config import Settings
from app.main import create_app
from app.models import utcnow
from app.team import drafts, misses
from app.team.models import MissedSearch

ROOT = Path(__file__).resolve().parent.parent
# an error no entry knows, with a home folder in a frame and in the message, a Windows profile
# folder, a user's e-mail address and numbers
SECRET_USER = "zorbatheuser"
MISSED = f"""Traceback (most recent call last):
  File "/home/{SECRET_USER}/work/train.py", line 12, in <module>
    frobnicate(model)
OSError: C:\\Users\\{SECRET_USER}\\AppData\\frob.dll refused to load (~{SECRET_USER}/cfg)

The above exception was the direct cause of the following exception:

FrobnicationError: cannot frobnicate /home/{SECRET_USER}/ckpt/epoch_7.pt for {SECRET_USER}@example.org after 3 tries
"""
SAME_TEMPLATE = (
    "FrobnicationError: cannot frobnicate /home/other/x/y.pt for someone@example.com after 12 tries"
)
CONFIDENT = "IndexError: Target 11 is out of bounds."


def make_client(tmp: Path, **overrides) -> TestClient:
    settings = Settings(
        **{
            "database_url": f"sqlite:///{tmp}/t.db",
            "content_dir": ROOT / "content",
            "local_workers": 0,
            "admin_token": "tok",
            **overrides,
        }
    )
    return TestClient(create_app(settings))


def table_dump(client: TestClient) -> str:
    with client.app.state.engine.connect() as c:
        return "\n".join(repr(tuple(r)) for r in c.execute(text("SELECT * FROM missed_search")))


def db_bytes(tmp: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp.glob("t.db*"))


@pytest.fixture(scope="module")
def client(tmp_path_factory, seed_db):
    tmp = tmp_path_factory.mktemp("misses")
    seed_db(tmp / "t.db")  # content/ already synced (tests/conftest.py): the app's start-up sync is quick
    team = tmp / "team"
    team.mkdir()
    with make_client(tmp, team_content_dir=team) as c:
        c.tmp = tmp
        yield c


AUTH = {"Authorization": "Bearer tok"}


def age(client: TestClient, seconds: float) -> None:
    """Move every recorded miss `seconds` into the past (instead of waiting)."""
    with Session(client.app.state.engine) as session:
        for m in session.scalars(select(MissedSearch)).all():
            m.first_seen -= timedelta(seconds=seconds)
            m.last_seen -= timedelta(seconds=seconds)
            session.add(m)
        session.commit()


def test_a_missed_search_is_stored_without_paths_or_user_names(client):
    r = client.post("/api/search", json={"q": MISSED})
    assert r.status_code == 200 and r.json()["confident"] is False
    age(client, misses.REPEAT_S + 1)
    client.post("/search", data={"q": MISSED})  # the page records too
    rows = client.get("/api/team/misses", headers=AUTH).json()
    row = next(m for m in rows if m["template"].startswith("FrobnicationError"))
    assert row["template"] == "FrobnicationError: cannot frobnicate _path_ for _email_ after _num_ tries"
    assert row["count"] == 2
    assert "OSError: _path_ refused to load (_path_)" in row["example"].split("\n")
    dump = table_dump(client)
    for secret in (SECRET_USER, "/home/", "Users", "AppData", "example.org", "train.py", "epoch"):
        assert secret not in dump
    client.app.state.engine.dispose()  # fold the WAL in: nothing of the paste is in the file either
    assert SECRET_USER.encode() not in db_bytes(client.tmp)


def test_confident_searches_are_not_recorded(client):
    before = client.get("/api/team/misses", headers=AUTH).json()
    assert client.get("/api/search", params={"q": CONFIDENT}).json()["confident"] is True
    assert client.get("/api/team/misses", headers=AUTH).json() == before


def test_misses_group_by_template_most_frequent_first(client):
    age(client, misses.TYPING_S + 1)
    client.post("/api/search", json={"q": "QuuxError: the quux overflowed at step 5"})
    client.post("/api/search", json={"q": SAME_TEMPLATE})
    rows = client.get("/api/team/misses", headers=AUTH).json()
    assert rows[0]["template"].startswith("FrobnicationError") and rows[0]["count"] == 3
    assert rows[0]["first_seen"] < rows[0]["last_seen"]
    assert rows[0]["example"] == "FrobnicationError: cannot frobnicate _path_ for _email_ after _num_ tries"
    quux = next(m for m in rows if m["template"].startswith("QuuxError"))
    assert quux["count"] == 1 and quux["template"] == "QuuxError: the quux overflowed at step _num_"
    assert [m["count"] for m in rows] == sorted((m["count"] for m in rows), reverse=True)


def test_recording_off_stores_nothing(tmp_path, seed_db):
    seed_db(tmp_path / "t.db")
    with make_client(tmp_path, record_misses=False) as c:
        assert c.post("/api/search", json={"q": MISSED}).json()["confident"] is False
        assert c.get("/api/search", params={"q": "QuuxError: the quux overflowed"}).status_code == 200
        assert c.post("/search", data={"q": MISSED}).status_code == 200
        assert table_dump(c) == ""
        assert c.get("/api/team/misses", headers=AUTH).json() == []
        c.app.state.engine.dispose()
    assert SECRET_USER.encode() not in db_bytes(tmp_path)


def test_retention_prunes_old_misses(client):
    settings = client.app.state.settings
    with Session(client.app.state.engine) as session:
        session.execute(
            update(MissedSearch)
            .where(MissedSearch.template.startswith("QuuxError"))
            .values(last_seen=utcnow() - timedelta(days=settings.misses_retention_days + 1))
        )
        session.commit()
    templates = [m["template"] for m in client.get("/api/team/misses", headers=AUTH).json()]
    assert templates and not any(t.startswith("QuuxError") for t in templates)


def test_draft_from_a_miss_is_a_skeleton_in_the_team_folder(client):
    team = client.app.state.settings.team_content_dir
    miss = client.get("/api/team/misses", headers=AUTH).json()[0]
    r = client.post(f"/api/team/misses/{miss['id']}/draft", headers=AUTH)
    assert r.status_code == 201, r.text
    path = team / r.json()["path"]
    assert path.parts[-3] == "drafts" and path.parts[-2] in content.CATEGORIES
    data = tomllib.loads(path.read_text())
    assert data["signatures"] == [miss["template"]]
    assert data["broken"]["expect"] == {"outcome": "raised", "exc_type": "FrobnicationError"}
    assert data["broken"]["code"] == "" and data["fixed"]["code"] == ""  # left for the author
    with pytest.raises(content.ContentError, match="field broken.code"):
        content.load_file(path, team)  # not an entry until it is finished
    # the sync never reads drafts/: the team folder still syncs
    content.sync(client.app.state.engine, ROOT / "content", team=team)
    listed = client.get("/api/team/misses", headers=AUTH).json()[0]
    assert listed["draft_path"] == r.json()["path"] and listed["drafted_by"] == "admin"
    actions = client.get("/api/team/actions", headers=AUTH).json()
    assert actions[0]["action"] == "draft created" and actions[0]["user"] == "admin"
    assert actions[0]["target"] == r.json()["path"]


def test_a_second_draft_of_the_same_miss_does_not_overwrite(client):
    miss = client.get("/api/team/misses", headers=AUTH).json()[0]
    first = miss["draft_path"]
    second = client.post(f"/api/team/misses/{miss['id']}/draft", headers=AUTH).json()["path"]
    assert second != first and second.endswith("-2.toml")


def test_category_guess():
    assert (
        drafts.guess_category(None, MissedSearch(template="RuntimeError: NCCL error in: _path_"))
        == "parallel"
    )
    assert (
        drafts.guess_category(None, MissedSearch(template="RuntimeError: cuDNN error: CUDNN_STATUS_FOO"))
        == "cuda"
    )
    assert (
        drafts.guess_category(None, MissedSearch(template="KeyError: unexpected key in state_dict"))
        == "loading"
    )
    assert drafts.guess_category(None, MissedSearch(template="Whatever: something odd")) == drafts.FALLBACK


def test_drafts_need_a_team_folder(tmp_path, seed_db):
    seed_db(tmp_path / "t.db")
    with make_client(tmp_path) as c:
        c.post("/api/search", json={"q": "QuuxError: the quux overflowed at step 5"})
        miss = c.get("/api/team/misses", headers=AUTH).json()[0]
        r = c.post(f"/api/team/misses/{miss['id']}/draft", headers=AUTH)
        assert r.status_code == 409 and "PITFALLS_TEAM_CONTENT_DIR" in r.json()["detail"]
        assert c.post("/api/team/misses/999/draft", headers=AUTH).status_code == 409


def test_error_lines_scrub_what_normalising_leaves():
    assert misses.error_lines("PermissionError: denied for ana@gpu-box-3.corp.example.com at ~ana/run") == [
        "PermissionError: denied for _email_ at _path_"
    ]
    assert misses.error_lines("OSError: could not open /home/ana") == ["OSError: could not open _path_"]


def test_cli_lists_misses_and_writes_a_draft(tmp_path, monkeypatch, seed_db):
    seed_db(tmp_path / "t.db")
    team = tmp_path / "team"
    team.mkdir()
    env = {
        "PITFALLS_DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
        "PITFALLS_CONTENT_DIR": str(ROOT / "content"),
        "PITFALLS_TEAM_CONTENT_DIR": str(team),
    }
    with make_client(tmp_path, team_content_dir=team) as c:
        c.post("/api/search", json={"q": MISSED})
        c.post("/api/search", json={"q": "QuuxError: the quux overflowed at step 5"})
        age(c, misses.REPEAT_S + 1)
        c.post("/api/search", json={"q": "QuuxError: the quux overflowed at step 6"})
    runner = CliRunner()
    r = runner.invoke(cli, ["misses", "--json"], env=env)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [m["count"] for m in rows] == [2, 1] and rows[0]["template"].startswith("QuuxError")
    r = runner.invoke(cli, ["misses"], env=env)
    assert "QuuxError: the quux overflowed at step _num_" in r.output and "2 missed searches" in r.output
    r = runner.invoke(cli, ["misses", "--draft", str(rows[0]["id"])], env=env)
    assert r.exit_code == 0, r.output
    drafted = list((team / "drafts").rglob("*.toml"))
    assert len(drafted) == 1 and "QuuxError: the quux overflowed at step _num_" in drafted[0].read_text()
    r = runner.invoke(cli, ["misses", "--draft", "999"], env=env)
    assert r.exit_code == 2 and "no missed search 999" in r.output


def test_live_search_while_typing_records_one_miss(tmp_path, seed_db):
    seed_db(tmp_path / "t.db")
    with make_client(tmp_path) as c:
        for typed in (
            "ZapError: the z",
            "ZapError: the zap coil",
            "ZapError: the zap coil melted at 41",
            "ZapError: the zap coil melted at 412",
            "ZapError: the zap coil melted",
        ):
            c.post("/search", data={"q": typed}, headers={"HX-Request": "true"})
        rows = c.get("/api/team/misses", headers=AUTH).json()
        assert [(m["template"], m["count"]) for m in rows] == [("ZapError: the zap coil melted at _num_", 1)]
        age(c, misses.REPEAT_S + 1)  # someone else, later: counted
        c.post("/api/search", json={"q": "ZapError: the zap coil melted at 7"})
        assert c.get("/api/team/misses", headers=AUTH).json()[0]["count"] == 2
        age(c, misses.TYPING_S + 1)  # an old miss is not replaced by a longer one
        c.post("/api/search", json={"q": "ZapError: the zap coil melted at 7 and more"})
        assert len(c.get("/api/team/misses", headers=AUTH).json()) == 2


def test_kept_lines_are_error_lines_not_the_sentences_beside_them():
    # the line picker also offers a paste's last plain lines beside its error (a weak second opinion
    # for search); the team features keep only the error
    kept = misses.error_lines(
        "my colleague ana ran train.py on box-7\nRuntimeError: CUDA error: out of memory"
    )
    assert kept == ["RuntimeError: CUDA error: out of memory"]
