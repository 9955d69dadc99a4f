"""The few queries search needs, on either backend, with the same result shapes.

`app.search` keeps its in-memory signature index per content generation; what it reads from the
database is here:

- `generation()`: the content generation (`meta`), checked on every search; a sync in another
  replica bumps it, so every replica's search sees new content without a restart;
- `signature_tokens()` / `signature_rows(ids)`: the rows the signature index is built from;
- `entry_bodies()` / `entry_text(slug)`: entries' words, for ordering ties;
- `free_text(terms, every=..., limit=...)`: ranked free-text hits `(slug, title, category, score)`,
  best first. SQLite: FTS5 BM25 (title 10, summary 4, body 1). PostgreSQL: `websearch_to_tsquery`
  over the weighted `tsvector` of 0004 (title A, summary B, body C) finds the candidates in its GIN
  index, and the same BM25 ranks them (IDF from `ts_stat`), so scores have the same range and the
  caller's squashing and confidence rule read both alike.

Terms are our own `[a-z0-9_]` tokens; each is quoted (a quote inside escaped), so user text is never
query syntax on either backend.

SQLite reads through one read-only `sqlite3` connection per thread (search is latency-bound; no
pool checkout per query). PostgreSQL reads through the engine's pool, one connection per search.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

SignatureRow = tuple[int, str, str, str, str, str, str]  # id, slug, text, tokens, aux, title, category
TextHit = tuple[str, str, str, float]  # slug, title, category, score (higher is better)

# FTS5: weights of title, summary, body; ts_rank_cd (only to pick candidates): D, C (body), B, A (title)
BM25 = "bm25(entry_fts, 10.0, 4.0, 1.0)"
TS_WEIGHTS = "{0.0, 0.1, 0.4, 1.0}"


class Reader:
    """One search's view of the database (see the module's docstring for each query)."""

    def generation(self) -> str:
        raise NotImplementedError

    def signature_tokens(self) -> Iterable[tuple[int, str, str]]:
        raise NotImplementedError

    def signature_rows(self, ids: list[int]) -> list[SignatureRow]:
        raise NotImplementedError

    def entry_bodies(self) -> list[str]:
        raise NotImplementedError

    def entry_text(self, slug: str) -> tuple[str, str]:
        raise NotImplementedError

    def free_text(self, terms: list[str], *, every: bool, limit: int) -> list[TextHit]:
        raise NotImplementedError


# In content order (an entry's signatures as its file lists them), never in the order rows were
# written: a re-synced entry's rows are the newest, and where signatures tie, the index keeps the
# first of equals; a re-synced database must answer as a fresh one does.
SIGNATURE_TOKENS = (
    "SELECT s.id, s.tokens, s.aux FROM signature s JOIN entry e ON e.slug = s.entry_slug "
    "ORDER BY e.category, s.entry_slug, s.id"
)
SIGNATURE_ROWS = (
    "SELECT s.id, s.entry_slug, s.text, s.tokens, s.aux, e.title, e.category FROM signature s "
    "JOIN entry e ON e.slug = s.entry_slug WHERE s.id IN ({})"
)
BODIES = "SELECT title || ' ' || summary || ' ' || cause || ' ' || fix FROM entry"
ENTRY_TEXT = "SELECT title, summary || ' ' || cause || ' ' || fix FROM entry WHERE slug = {}"


class SqliteReader(Reader):
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def generation(self) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return row[0] if row else "0"

    def signature_tokens(self) -> Iterable[tuple[int, str, str]]:
        return self.conn.execute(SIGNATURE_TOKENS)

    def signature_rows(self, ids: list[int]) -> list[SignatureRow]:
        return self.conn.execute(SIGNATURE_ROWS.format(",".join("?" * len(ids))), ids).fetchall()

    def entry_bodies(self) -> list[str]:
        return [body for (body,) in self.conn.execute(BODIES)]

    def entry_text(self, slug: str) -> tuple[str, str]:
        return self.conn.execute(ENTRY_TEXT.format("?"), (slug,)).fetchone() or ("", "")

    def free_text(self, terms: list[str], *, every: bool, limit: int) -> list[TextHit]:
        # the porter tokenizer stems both sides, so words go in as typed (quoted: never syntax)
        match = (" AND " if every else " OR ").join('"' + t.replace('"', '""') + '"' for t in terms)
        return self.conn.execute(
            f"SELECT slug, e.title, e.category, -{BM25} AS s FROM entry_fts JOIN entry e USING (slug) "
            "WHERE entry_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, limit),
        ).fetchall()


# entries, average indexed length, each word's document frequency
Stats = tuple[int, float, dict[str, int]]
StatsCache = dict[str, tuple[str, Stats]]  # "stats": (content generation, its statistics)


class PostgresReader(Reader):
    def __init__(self, conn: Connection, cache: StatsCache):
        self.conn, self.cache = conn, cache
        self._generation: str | None = None

    def generation(self) -> str:
        if self._generation is None:
            row = self.conn.execute(text("SELECT value FROM meta WHERE key = 'generation'")).first()
            self._generation = row[0] if row else "0"
        return self._generation

    def signature_tokens(self) -> Iterable[tuple[int, str, str]]:
        return [tuple(r) for r in self.conn.execute(text(SIGNATURE_TOKENS))]

    def signature_rows(self, ids: list[int]) -> list[SignatureRow]:
        rows = self.conn.execute(
            text(SIGNATURE_ROWS.format("SELECT unnest(CAST(:ids AS integer[]))")), {"ids": list(ids)}
        )
        return [tuple(r) for r in rows]

    def entry_bodies(self) -> list[str]:
        return [body for (body,) in self.conn.execute(text(BODIES))]

    def entry_text(self, slug: str) -> tuple[str, str]:
        row = self.conn.execute(text(ENTRY_TEXT.format(":slug")), {"slug": slug}).first()
        return tuple(row) if row else ("", "")

    def free_text(self, terms: list[str], *, every: bool, limit: int) -> list[TextHit]:
        """Candidates from the GIN index, ranked by the same BM25 as FTS5's (weights per field, IDF from
        `ts_stat` once per content generation): PostgreSQL's own `ts_rank` knows no IDF, so a common
        word would weigh as much as a rare one."""
        if not terms:
            return []
        # websearch syntax: quoted words (a word with `_` is a phrase of its parts, as in the index),
        # space means AND, `or` means OR; stemmed and stop-worded by the same 'english' configuration
        quoted = ['"' + t.replace('"', " ") + '"' for t in terms]
        # with any word, the entries holding every word come first among the candidates: the BM25
        # rerank sees at most RERANK of them, and any word must find at least what every word finds
        rows = self.conn.execute(
            text(
                "SELECT f.slug, e.title, e.category, CAST(f.tsv AS text) FROM entry_fts f JOIN entry e ON e.slug = f.slug, "
                "websearch_to_tsquery('english', :q) q, websearch_to_tsquery('english', :every) q_every "
                "WHERE f.tsv @@ q "
                f"ORDER BY f.tsv @@ q_every DESC, ts_rank_cd('{TS_WEIGHTS}', f.tsv, q) DESC LIMIT {RERANK}"
            ),
            {"q": " ".join(quoted) if every else " or ".join(quoted), "every": " ".join(quoted)},
        ).all()
        if not rows:
            return []
        lexemes = [
            lex
            for (lex,) in self.conn.execute(
                text(
                    "SELECT DISTINCT lexeme FROM unnest(CAST(:terms AS text[])) t, unnest(to_tsvector('english', t))"
                ),
                {"terms": terms},
            )
        ]
        n, avgdl, df = self.stats()
        scored = []
        for slug, title, category, tsv in rows:
            tf, dl = parse_tsvector(tsv)
            score = sum(bm25_term(tf.get(lex, {}), df.get(lex, 0), n, dl, avgdl) for lex in lexemes)
            scored.append((slug, title, category, score))
        scored.sort(key=lambda r: (-r[3], r[0]))
        return scored[:limit]

    def stats(self) -> Stats:
        """Entries, average indexed length, and each word's document frequency (cached per generation)."""
        gen = self.generation()
        cached = self.cache.get("stats")
        if cached is None or cached[0] != gen:
            n = self.conn.execute(text("SELECT count(*) FROM entry_fts")).scalar_one()
            df: dict[str, int] = {}
            total = 0
            for word, ndoc, nentry in self.conn.execute(
                text("SELECT word, ndoc, nentry FROM ts_stat('SELECT tsv FROM entry_fts')")
            ):
                df[word], total = ndoc, total + nentry
            cached = self.cache["stats"] = (gen, (n, total / n if n else 1.0, df))
        return cached[1]


TSV_ITEM = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")
WEIGHT_OF = {"A": 10.0, "B": 4.0, "C": 1.0, "D": 1.0}  # title, summary, body: FTS5's column weights
RERANK = 200  # candidates reranked by BM25 (the GIN index finds them, ts_rank_cd picks the 200)
K1, B = 1.2, 0.75  # FTS5's bm25 constants


def parse_tsvector(tsv: str) -> tuple[dict[str, dict[str, int]], int]:
    """`'word':1A,5B 'other':3C` -> ({word: {field: count}}, positions in all)."""
    out, dl = {}, 0
    for lex, positions in TSV_ITEM.findall(tsv):
        per: dict[str, int] = {}
        for p in positions.split(","):
            w = p[-1] if p[-1] in "ABC" else "D"
            per[w] = per.get(w, 0) + 1
            dl += 1
        out[lex.replace("''", "'")] = per
    return out, dl


def bm25_term(tf: dict[str, int], df: int, n: int, dl: int, avgdl: float) -> float:
    """One word's BM25 share, as FTS5 computes it: field-weighted frequency, IDF floored just above 0."""
    if not tf:
        return 0.0
    idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
    f = sum(WEIGHT_OF[w] * c for w, c in tf.items())
    return idf * f * (K1 + 1) / (f + K1 * (1 - B + B * dl / avgdl))


class SearchStore:
    """Hands out a `Reader` per search for the engine's backend."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.backend = engine.url.get_backend_name()
        self._local = threading.local()
        self._cache: StatsCache = {}  # PostgreSQL: free-text statistics of one content generation

    @contextmanager
    def reader(self) -> Iterator[Reader]:
        if self.backend == "sqlite":
            yield SqliteReader(self._sqlite())
            return
        with self.engine.connect() as conn:
            yield PostgresReader(conn, self._cache)
            conn.rollback()

    def _sqlite(self) -> sqlite3.Connection:
        """One read-only sqlite3 connection per thread, our own: the engine's pool may be disposed under
        us (app shutdown, tests)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                f"file:{self.engine.url.database}?mode=ro", uri=True, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 5000")
            self._local.conn = conn
        return conn
