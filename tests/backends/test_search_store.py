"""The queries search needs (app/search_store.py), on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import shutil

import pytest
from sqlmodel import Session, func, select

from app import content
from app.config import Settings
from app.db import make_engine
from app.models import Entry, Signature
from app.search_store import SearchStore, parse_tsvector
from tests.conftest import ROOT


@pytest.fixture()
def store(synced_db_url):
    engine = make_engine(Settings(database_url=synced_db_url))
    yield SearchStore(engine)
    engine.dispose()


def test_store_reads_signatures_entries_and_generation(store):
    with Session(store.engine) as s:
        n_sigs = s.exec(select(func.count()).select_from(Signature)).one()
        sig = s.exec(select(Signature).where(Signature.entry_slug == "view-non-contiguous")).first()
        entry = s.get(Entry, "view-non-contiguous")
    with store.reader() as r:
        assert int(r.generation()) >= 1
        rows = list(r.signature_tokens())
        assert len(rows) == n_sigs and all(isinstance(i, int) and isinstance(t, str) for i, t, _ in rows)
        [(sid, slug, text, tokens, aux, title, category)] = r.signature_rows([sig.id])
        assert (sid, slug, text, tokens, title, category) == (
            sig.id,
            entry.slug,
            sig.text,
            sig.tokens,
            entry.title,
            entry.category,
        )
        assert r.signature_rows([sig.id, 10**9]) == r.signature_rows([sig.id])
        assert len(r.entry_bodies()) == len(set(r.entry_bodies())) > 100
        title, body = r.entry_text("view-non-contiguous")
        assert title == entry.title and entry.fix in body
        assert r.entry_text("no-such-entry") == ("", "")


FREE_TEXT = [  # (words a reader types, the entry they mean)
    (["dataloader", "hangs"], "dataloader-hangs-in-poll"),
    (["loss", "nan"], "nan-loss"),
    (["gradient", "none"], "gradient-checkpointing-frozen-inputs"),
    (["num_batches_tracked", "missing", "key"], "batchnorm-num-batches-tracked-key"),
    (["learning", "rate", "warmup"], "lr-warmup-lambdalr-factor"),
    (["optimizer", "step", "before", "scheduler"], "scheduler-step-before-optimizer-step"),
    (["device", "side", "assert", "triggered"], "device-side-assert-index-out-of-range"),
]


@pytest.mark.parametrize(("terms", "slug"), FREE_TEXT)
def test_store_free_text_ranks_the_meant_entry_high(store, terms, slug):
    with store.reader() as r:
        every = r.free_text(terms, every=True, limit=10)
        anyone = r.free_text(terms, every=False, limit=10)
    assert slug in [h[0] for h in every[:3]]  # (the content grows: first today, top three tomorrow)
    assert all(len(h) == 4 and isinstance(h[3], float) for h in every)
    scores = [h[3] for h in anyone]
    assert slug in [h[0] for h in anyone[:3]]
    # BM25 on both backends: the same range, so search squashes and compares them alike
    assert 2.0 < every[0][3] < 40.0
    if store.backend == "postgresql":
        assert scores == sorted(scores, reverse=True)
    # any word finds at least what every word finds
    assert {h[0] for h in every} <= {h[0] for h in r_any(store, terms)}


def r_any(store, terms):
    with store.reader() as r:
        return r.free_text(terms, every=False, limit=1000)


@pytest.mark.parametrize(
    "term", ['"', "or", "and", "not", "near", "a'b", "x:y", "*", "(", "__", "0" * 50, "é"]
)
def test_store_free_text_terms_are_never_syntax(store, term):
    with store.reader() as r:
        assert isinstance(r.free_text([term, "loss"], every=True, limit=5), list)
        assert isinstance(r.free_text([term], every=False, limit=5), list)


def test_store_sees_a_sync_made_through_another_engine(store, synced_db_url, tmp_path):
    """A sync by another process (another replica) bumps the generation and is read at once."""
    folder = tmp_path / "content"
    shutil.copytree(ROOT / "content", folder)
    other = make_engine(Settings(database_url=synced_db_url))
    try:
        content.sync(other, folder)  # the database as this copy has it (content/ may change meanwhile)
        with store.reader() as r:
            before = r.generation()
            assert r.free_text(["zanzibarish"], every=True, limit=5) == []
        path = folder / "loss" / "nan-loss.toml"
        path.write_text(path.read_text().replace('title = "', 'title = "Zanzibarish ', 1))
        assert content.sync(other, folder).updated == ["nan-loss"]
    finally:
        other.dispose()
    with store.reader() as r:
        assert int(r.generation()) == int(before) + 1
        assert [h[0] for h in r.free_text(["zanzibarish"], every=True, limit=5)] == ["nan-loss"]


def test_parse_tsvector_counts_fields_and_positions():
    tf, dl = parse_tsvector("'it''s':4C 'loss':1A,3B,9 'nan':2A")
    assert tf == {"it's": {"C": 1}, "loss": {"A": 1, "B": 1, "D": 1}, "nan": {"A": 1}} and dl == 5
