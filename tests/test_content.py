"""Content sync: idempotent, all-or-nothing, and errors that name the file and the field."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from app import content
from app.config import Settings
from app.db import make_engine, migrate
from app.normalize import normalize
from app.runs import spec_snippets

ROOT = Path(__file__).resolve().parent.parent
GOOD = (ROOT / "content/mismatch/view-non-contiguous.toml").read_text()


@pytest.fixture()
def tree(tmp_path):
    (tmp_path / "mismatch").mkdir()
    (tmp_path / "mismatch/view-non-contiguous.toml").write_text(GOOD)
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss/second-entry.toml").write_text(GOOD.replace("view() on a", "Another: view() on a"))
    settings = Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite", content_dir=tmp_path)
    migrate(settings)
    engine = make_engine(settings)
    yield tmp_path, engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as c:
        return c.execute(text(f"SELECT count(*) FROM {table}")).scalar()


def test_sync_is_idempotent_and_removes_vanished(tree):
    root, engine = tree
    first = content.sync(engine, root)
    assert sorted(first.added) == ["second-entry", "view-non-contiguous"]
    again = content.sync(engine, root)
    assert again.unchanged == 2 and not (again.added or again.updated or again.removed)
    sigs = _count(engine, "signature")
    (root / "loss/second-entry.toml").unlink()
    gone = content.sync(engine, root)
    assert gone.removed == ["second-entry"]
    assert _count(engine, "signature") == sigs // 2
    assert _count(engine, "entry_fts") == 1


def test_sync_keeps_run_history_of_updated_entries(tree):
    root, engine = tree
    content.sync(engine, root)
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO run(entry_slug, state, job, results, attempts, created_at) "
                "VALUES ('view-non-contiguous', 'done', '{}', '{}', 1, '2026-01-01')"
            )
        )
    path = root / "mismatch/view-non-contiguous.toml"
    path.write_text(GOOD.replace("One paragraph", "One paragraph") + "\n# edited\n")
    report = content.sync(engine, root)
    assert report.updated == ["view-non-contiguous"]
    assert _count(engine, "run") == 1


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda s: s.replace('title = "', 'titel = "', 1), "titel"),
        (lambda s: s.replace('outcome = "raised"', 'outcome = "exploded"', 1), "broken.expect.outcome"),
        (lambda s: s.replace("signatures = [", "signatures = 5\nold = [", 1), "signatures"),
        (lambda s: s.replace("import torch\n", "import torch\nif True\n", 1), "broken.code"),
        (
            lambda s: s.replace('match = "view size is not compatible"', 'match = "(unclosed"', 1),
            "broken.expect.match",
        ),
        (lambda s: s + "\n[[[", "TOML syntax error"),
    ],
)
def test_sync_bad_file_names_file_and_field_and_keeps_data(tree, mutate, field):
    root, engine = tree
    content.sync(engine, root)
    before = _count(engine, "signature")
    (root / "loss/second-entry.toml").write_text(mutate(GOOD))
    with pytest.raises(content.ContentError) as err:
        content.sync(engine, root)
    assert "loss/second-entry.toml" in str(err.value) and field in str(err.value)
    assert _count(engine, "entry") == 2 and _count(engine, "signature") == before


def test_sync_rejects_unknown_category_and_bad_slug(tree):
    root, engine = tree
    (root / "gpu").mkdir()
    shutil.copy(root / "mismatch/view-non-contiguous.toml", root / "gpu/x.toml")
    with pytest.raises(content.ContentError, match="not a category"):
        content.sync(engine, root)
    shutil.rmtree(root / "gpu")
    (root / "loss/Bad_Name.toml").write_text(GOOD)
    with pytest.raises(content.ContentError, match="not a slug"):
        content.sync(engine, root)


def test_sync_rejects_non_utf8(tree):
    root, engine = tree
    (root / "loss/second-entry.toml").write_bytes(b'title = "\xff\xfe"\n')
    with pytest.raises(content.ContentError, match="UTF-8"):
        content.sync(engine, root)


def test_real_content_loads_and_covers_every_seed_line():
    entries = content.load_dir(ROOT / "content")
    covered = {s for e in entries for s in e.spec.seeds}
    inventory = {line["id"] for line in content.seed_inventory(ROOT / "content")}
    assert inventory and inventory <= covered, sorted(inventory - covered)
    assert covered <= inventory, sorted(covered - inventory)
    assert {e.category for e in entries} == set(content.CATEGORIES)


def test_no_signature_is_a_wrappers_header_alone():
    # search drops wrapper text (`Failed to import X because of the following error ...`): a signature
    # that says nothing else reads as a bare `RuntimeError` and would match every such line
    alone = [
        (e.slug, s)
        for e in content.load_dir(ROOT / "content")
        for s in e.spec.signatures
        if len(said := normalize(s).tokens) == 1 and said[0].endswith("error") and len(s.split()) > 1
    ]
    assert not alone, alone


def test_a_snippet_that_sets_cuda_variables_first_runs_in_a_fresh_process():
    # CUDA reads CUDA_VISIBLE_DEVICES and CUDA_LAUNCH_BLOCKING once, when it starts; on a GPU machine
    # a warm child has started it before the snippet's first line, so setting them there does nothing
    sets = re.compile(r"^os\.environ\[[\"']CUDA_(VISIBLE_DEVICES|LAUNCH_BLOCKING)[\"']\] *=", re.M)
    warm = [
        (e.slug, part)
        for e in content.load_dir(ROOT / "content")
        for part, s in spec_snippets(e.spec).items()
        if s and sets.search(s["code"]) and not e.spec.requires.fresh_process
    ]
    assert not warm, warm


def test_sync_refuses_mass_removal_without_force(tree):
    root, engine = tree
    for n in range(3):
        (root / f"loss/extra-{n}.toml").write_text(GOOD.replace("view() on a", f"Extra {n}: view() on a"))
    content.sync(engine, root)
    assert _count(engine, "entry") == 5
    for f in root.rglob("*.toml"):  # a content folder that came up empty (a missing mount)
        f.unlink()
    (root / "mismatch/view-non-contiguous.toml").write_text(GOOD)
    with pytest.raises(content.ContentError, match="would remove 4 of 5 entries"):
        content.sync(engine, root)
    assert _count(engine, "entry") == 5
    report = content.sync(engine, root, force=True)
    assert len(report.removed) == 4 and _count(engine, "entry") == 1


def test_sync_rejects_a_link_to_an_entry_that_does_not_exist(tree):
    # hub entries link the entries of a message's other causes (`[title](/e/slug)`): a typo or a
    # removed entry would be a dead link on the page
    root, engine = tree
    content.sync(engine, root)
    linked = (
        'cause = """See [the other entry](/e/view-non-contiguous) and [a gone one](/e/no-such-entry).\n\n'
    )
    (root / "loss/second-entry.toml").write_text(GOOD.replace('cause = """', linked, 1))
    with pytest.raises(content.ContentError) as err:
        content.sync(engine, root)
    assert "loss/second-entry.toml" in str(err.value) and "cause" in str(err.value)
    assert "no-such-entry" in str(err.value) and "view-non-contiguous" not in str(err.value).split(":", 1)[1]
    assert _count(engine, "entry") == 2
