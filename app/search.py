"""Find the entry that explains a pasted error.

1. `normalize.extract` picks the lines that carry the error and sets volatile parts aside.
2. Signature match: the rarest tokens of those lines fetch candidate signatures from the FTS5
   index; each candidate is rescored by IDF-weighted overlap (recall of the signature weighs most).
3. Free text ("dataloader hangs"): BM25 over title, summary and body.
4. Confident only when a signature matches well, or free text names one entry clearly.

User text never reaches FTS5 as syntax: queries are built from our own `[a-z0-9_]` tokens, each
double-quoted.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field

from sqlalchemy.engine import Engine

from .normalize import WORD, extract, normalize

AUX_WEIGHT = 0.3  # quoted names matter, but less than the words around them
CANDIDATES = 100
GENERIC_WORDS = 5
QUOTED_MISMATCH = 0.7
TOKENS_PER_LINE = 6
MAX_QUERY_TOKENS = 24
STOPWORDS = frozenset("a an and are as at be but by for from has have how i in is it my of on or that the this "
                      "to was when why with without not no do does did can get got".split())


class QueryError(ValueError):
    """The search text can't be searched (empty, too large); the message says why."""


@dataclass
class Hit:
    slug: str
    title: str
    category: str
    score: float
    matched: str  # the signature (or the words) that matched
    line: str = ""  # the line of the paste it matched
    kind: str = "signature"  # signature | text
    support: float = 0.0  # how well the entry also matches the paste's other lines (ranking only)


@dataclass
class SearchResult:
    query: str
    confident: bool
    results: list[Hit]
    lines: list[str] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"query": self.query, "confident": self.confident, "results": [{k: v for k, v in asdict(h).items() if k != "support"} for h in self.results],
                "lines": self.lines, "ignored": self.ignored}


def _weights(tokens: list[str], aux: list[str], idf) -> dict[str, float]:
    w = {t: idf(t) for t in tokens}
    for t in aux:
        w.setdefault(t, AUX_WEIGHT * idf(t))
    return w


def similarity(line_w: dict[str, float], sig_w: dict[str, float]) -> float:
    """F2 of weighted token overlap: how much of the signature the line contains, mostly."""
    shared = sum(min(v, line_w[t]) for t, v in sig_w.items() if t in line_w)
    if not shared:
        return 0.0
    recall = shared / sum(sig_w.values())
    precision = shared / sum(line_w.values())
    return 5 * precision * recall / (4 * precision + recall)


class Searcher:
    """Search over one database; caches document frequencies until the content changes."""

    def __init__(self, engine: Engine, *, confident_score: float = 0.7, limit: int = 10,
                 max_query_bytes: int = 1_000_000):
        self.engine = engine
        self.confident_score = confident_score
        self.limit = limit
        self.max_query_bytes = max_query_bytes
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._sig_df: dict[str, int] = {}
        self._sig_n = 1
        self._local = threading.local()

    # -- plumbing ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        """One raw sqlite3 connection per thread: search is read-only and latency-bound."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.engine.raw_connection().driver_connection
            self._local.conn = conn
        return conn

    def _refresh(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        gen = row[0] if row else "0"
        if gen == self._generation:
            return
        with self._lock:
            self._sig_df = dict(conn.execute("SELECT term, doc FROM sig_vocab"))
            self._sig_n = conn.execute("SELECT count(*) FROM signature").fetchone()[0] or 1
            self._generation = gen

    def idf(self, token: str) -> float:
        return math.log(1 + self._sig_n / (self._sig_df.get(token, 0) + 0.5))

    # -- search -----------------------------------------------------------------------------
    def search(self, text: str, *, limit: int | None = None) -> SearchResult:
        if not isinstance(text, str):
            raise QueryError("the search text must be a string")
        if len(text.encode("utf-8", "surrogatepass")) > self.max_query_bytes:
            raise QueryError(f"the search text is larger than {self.max_query_bytes} bytes; paste the last part "
                             "of the traceback instead")
        text = text.replace("\x00", "")
        if not text.strip():
            raise QueryError("the search text is empty: paste an error message or a traceback")
        limit = limit or self.limit
        conn = self._conn()
        self._refresh(conn)
        ex = extract(text)
        ignored: Counter = Counter()
        normalized = []
        for line, weight in ex.lines:
            n = normalize(line)
            ignored.update(n.ignored)
            normalized.append((line, weight, n))
        if ex.frames:
            ignored["traceback frame"] = ex.frames
        hits = self._by_signature(conn, normalized) if normalized else {}
        best = max((h.score for h in hits.values()), default=0.0)
        confident = best >= self.confident_score
        if not confident:
            free = ex.free_text if not normalized else " ".join(line for line, _, _ in normalized)
            text_hits, text_confident = self._by_text(conn, free, only_free=not normalized)
            for h in text_hits:
                if h.slug not in hits or hits[h.slug].score < h.score:
                    hits[h.slug] = h
            confident = text_confident
        ranked = sorted(hits.values(), key=lambda h: -(h.score + 0.1 * h.support))[:limit]
        return SearchResult(text[:200], confident and bool(ranked), ranked, [line for line, _, _ in normalized],
                            {k: v for k, v in ignored.items() if v})

    def _by_signature(self, conn: sqlite3.Connection, lines) -> dict[str, Hit]:
        query_tokens: list[str] = []
        line_weights = []
        for line, weight, n in lines:
            known = sorted({t for t in n.tokens + n.aux if t in self._sig_df}, key=self._sig_df.__getitem__)
            query_tokens.extend(t for t in known[:TOKENS_PER_LINE] if t not in query_tokens)
            line_weights.append((line, weight, _weights(n.tokens, n.aux, self.idf), set(n.aux)))
        if not query_tokens:
            return {}
        match = " OR ".join(f'"{t}"' for t in query_tokens[:MAX_QUERY_TOKENS])
        rows = conn.execute(
            "SELECT s.entry_slug, s.text, s.tokens, s.aux, e.title, e.category FROM "
            "(SELECT rowid FROM sig_fts WHERE sig_fts MATCH ? ORDER BY rank LIMIT ?) AS f "
            "JOIN signature s ON s.id = f.rowid JOIN entry e ON e.slug = s.entry_slug",
            (match, CANDIDATES),
        ).fetchall()
        best: dict[str, Hit] = {}
        per_line: dict[str, dict[str, float]] = {}  # slug -> paste line -> best score
        for slug, sig_text, tokens, aux, title, category in rows:
            sig_tokens, sig_aux = tokens.split(), set(aux.split())
            sig_w = _weights(sig_tokens, list(sig_aux), self.idf)
            # a short signature whose point is a quoted name ("No module named 'models'") must not
            # claim a paste that quotes a different name
            generic = len([t for t in sig_tokens if not t.startswith("_")]) <= GENERIC_WORDS
            for line, weight, line_w, line_aux in line_weights:
                score = similarity(line_w, sig_w) * weight
                if generic and sig_aux and line_aux and not sig_aux & line_aux:
                    score *= QUOTED_MISMATCH
                score = round(score, 4)
                if score <= 0.1:
                    continue
                seen = per_line.setdefault(slug, {})
                seen[line] = max(seen.get(line, 0.0), score)
                if slug not in best or best[slug].score < score:
                    best[slug] = Hit(slug, title, category, score, sig_text, line)
        # an entry that explains more lines of the paste ranks first among equals
        for slug, hit in best.items():
            hit.support = sum(per_line[slug].values()) - hit.score
        return best

    def _by_text(self, conn: sqlite3.Connection, text: str, *, only_free: bool) -> tuple[list[Hit], bool]:
        # the porter tokenizer stems both sides, so words go in as typed (quoted: never syntax)
        words = [w for w in WORD.findall(text.lower()) if w not in STOPWORDS and not w.isdigit() and len(w) > 1]
        known = list(dict.fromkeys(words))[:MAX_QUERY_TOKENS]
        if not known:
            return [], False
        match = " OR ".join(f'"{t}"' for t in known)
        rows = conn.execute(
            "SELECT slug, e.title, e.category, -bm25(entry_fts, 10.0, 4.0, 1.0) AS s "
            "FROM entry_fts JOIN entry e USING (slug) WHERE entry_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, self.limit),
        ).fetchall()
        if not rows:
            return [], False
        # BM25 is unbounded; squash it below the confidence threshold (free text rarely proves a match)
        hits = [Hit(slug, title, cat, round(0.6 * s / (s + 8.0), 4), " ".join(known), text[:200], "text")
                for slug, title, cat, s in rows]
        # short free text that names one entry clearly: every word found, well ahead of the next
        confident = False
        if only_free and 2 <= len(known) <= 8:
            every = " AND ".join(f'"{t}"' for t in known)
            n_all = conn.execute("SELECT count(*) FROM (SELECT 1 FROM entry_fts WHERE entry_fts MATCH ? LIMIT 3)",
                                 (every,)).fetchone()[0]
            second = rows[1][3] if len(rows) > 1 else 0.0
            confident = n_all == 1 and rows[0][3] >= 1.3 * second
        return hits, confident
