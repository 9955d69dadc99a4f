"""The team's content folder (issue 13): its entries and notes sync beside the shipped content with
the same validation, survive upgrades of the shipped content, and a broken or colliding file names
the file and changes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app import content
from app.config import Settings
from app.db import make_engine, migrate
from app.main import create_app

ROOT = Path(__file__).resolve().parent.parent
GOOD = (ROOT / "content/mismatch/view-non-contiguous.toml").read_text()
TEAM_ENTRY = GOOD.replace('title = "', 'title = "Our cluster: ', 1).replace(
    "signatures = [", 'signatures = ["RuntimeError: NCCL_IB_TIMEOUT on the blue cluster reached", ', 1
)
NOTE = "On our cluster set `NCCL_IB_DISABLE=1` before blaming the model.\n"


@pytest.fixture()
def tree(tmp_path):
    shipped = tmp_path / "content"
    (shipped / "mismatch").mkdir(parents=True)
    (shipped / "mismatch/view-non-contiguous.toml").write_text(GOOD)
    (shipped / "loss").mkdir()
    (shipped / "loss/second-entry.toml").write_text(GOOD.replace("view() on a", "Another: view() on a"))
    team = tmp_path / "team"
    (team / "parallel").mkdir(parents=True)
    (team / "parallel/blue-cluster-ib-timeout.toml").write_text(TEAM_ENTRY)
    (team / "notes").mkdir()
    (team / "notes/view-non-contiguous.md").write_text(NOTE)
    (team / "drafts/cuda").mkdir(parents=True)
    (team / "drafts/cuda/half-written.toml").write_text('title = "x"\n')  # never synced
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite", content_dir=shipped, team_content_dir=team
    )
    migrate(settings)
    engine = make_engine(settings)
    yield shipped, team, engine
    engine.dispose()


def snapshot(engine) -> tuple:
    with engine.connect() as c:
        return (
            c.execute(text("SELECT slug, content_hash, path FROM entry ORDER BY slug")).all(),
            c.execute(text("SELECT entry_slug, text, path FROM team_note ORDER BY path")).all(),
            c.execute(text("SELECT count(*) FROM signature")).scalar(),
        )


def test_team_entries_and_notes_sync_beside_shipped_ones(tree):
    shipped, team, engine = tree
    report = content.sync(engine, shipped, team=team)
    assert sorted(report.added) == ["blue-cluster-ib-timeout", "second-entry", "view-non-contiguous"]
    entries, notes, _ = snapshot(engine)
    assert (
        "blue-cluster-ib-timeout",
        entries[0][1],
        "team/parallel/blue-cluster-ib-timeout.toml",
    ) == entries[0]
    assert notes == [("view-non-contiguous", NOTE.strip(), "team/notes/view-non-contiguous.md")]
    again = content.sync(engine, shipped, team=team)
    assert again.unchanged == 3 and not again.added and snapshot(engine)[1] == notes


def test_team_content_survives_an_upgrade_of_the_shipped_content(tree):
    shipped, team, engine = tree
    content.sync(engine, shipped, team=team)
    # an upgrade: a shipped entry changes, another is removed, one is added
    (shipped / "mismatch/view-non-contiguous.toml").write_text(GOOD + "\n# upgraded\n")
    (shipped / "loss/second-entry.toml").unlink()
    (shipped / "loss/third-entry.toml").write_text(GOOD.replace("view() on a", "Third: view() on a"))
    report = content.sync(engine, shipped, team=team)
    assert report.updated == ["view-non-contiguous"] and report.removed == ["second-entry"]
    entries, notes, _ = snapshot(engine)
    assert "blue-cluster-ib-timeout" in [e[0] for e in entries] and len(notes) == 1


def test_a_team_slug_that_a_shipped_entry_has_is_an_error_naming_both(tree):
    shipped, team, engine = tree
    content.sync(engine, shipped, team=team)
    before = snapshot(engine)
    (team / "mismatch").mkdir()
    (team / "mismatch/view-non-contiguous.toml").write_text(TEAM_ENTRY)
    with pytest.raises(content.ContentError) as exc:
        content.sync(engine, shipped, team=team)
    assert "team/mismatch/view-non-contiguous.toml" in str(exc.value)
    assert "mismatch/view-non-contiguous.toml" in str(exc.value).split("shipped entry", 1)[1]
    assert snapshot(engine) == before


@pytest.mark.parametrize(
    "name, body, problem",
    [
        ("parallel/blue-cluster-ib-timeout.toml", "title = [unclosed", "TOML syntax error"),
        ("parallel/blue-cluster-ib-timeout.toml", TEAM_ENTRY.replace("[broken]", "[brokn]"), "field broken"),
        ("notes/no-such-entry.md", NOTE, "no entry 'no-such-entry'"),
        ("notes/view-non-contiguous.md", "   \n", "the note is empty"),
        ("notes/view-non-contiguous.md", b"\xff\xfe note", "not UTF-8"),
    ],
)
def test_a_broken_team_file_names_the_file_and_changes_nothing(tree, name, body, problem):
    shipped, team, engine = tree
    content.sync(engine, shipped, team=team)
    before = snapshot(engine)
    (team / "parallel/extra-entry.toml").write_text(
        TEAM_ENTRY.replace("Our cluster", "Extra")
    )  # would be added
    path = team / name
    path.write_bytes(body) if isinstance(body, bytes) else path.write_text(body)
    with pytest.raises(content.ContentError) as exc:
        content.sync(engine, shipped, team=team)
    assert str(exc.value).startswith(f"team/{name}: ") and problem in str(exc.value)
    assert snapshot(engine) == before


def test_a_missing_team_folder_is_an_error(tree):
    shipped, team, engine = tree
    shutil.rmtree(team)
    with pytest.raises(content.ContentError, match="content folder not found"):
        content.sync(engine, shipped, team=team)


def test_team_entries_are_searched_and_notes_shown(tmp_path, seed_db):
    seed_db(tmp_path / "t.db")  # shipped content already synced; the app's start-up sync adds the team's
    team = tmp_path / "team"
    (team / "parallel").mkdir(parents=True)
    (team / "parallel/blue-cluster-ib-timeout.toml").write_text(TEAM_ENTRY)
    (team / "notes").mkdir()
    (team / "notes/cross-entropy-target-out-of-range.md").write_text(NOTE)
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/t.db",
        content_dir=ROOT / "content",
        local_workers=0,
        team_content_dir=team,
    )
    with TestClient(create_app(settings)) as c:
        r = c.get(
            "/api/search", params={"q": "RuntimeError: NCCL_IB_TIMEOUT on the blue cluster reached"}
        ).json()
        assert r["results"][0]["slug"] == "blue-cluster-ib-timeout"
        page = c.get("/e/cross-entropy-target-out-of-range").text
        assert "Your team's notes" in page and "<code>NCCL_IB_DISABLE=1</code>" in page
        assert "Your team's notes" not in c.get("/e/view-non-contiguous").text
