"""Turn a missed search into a draft entry file in the team's content folder.

A draft is a TOML skeleton in the entry format (content/README.md) with the signature filled in
from the miss, the category guessed and the snippets left for the author. It is written to
`drafts/<category>/<slug>.toml`, which the sync never reads (a half-written entry must not stop it):
the author finishes it and moves it to `<category>/<slug>.toml`.
"""

from __future__ import annotations

import re
from pathlib import Path

import tomli_w
from sqlmodel import Session

from ..categories import CATEGORIES
from ..models import Entry, utcnow
from . import audit
from .models import MissedSearch

DRAFTS = "drafts"
EXC = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Interrupt|Failure))\s*:")
# First rule that matches the error's template wins; the entry search offered first wins over all.
GUESSES: list[tuple[str, re.Pattern[str]]] = [
    (
        "parallel",
        re.compile(r"nccl|distributed|process ?group|\bddp\b|rank|gloo|DataParallel|torchrun", re.I),
    ),
    ("onnx", re.compile(r"onnx|opset|quantiz|torch\.export|tracer", re.I)),
    ("data", re.compile(r"dataloader|worker|collate|dataset|shared memory|shm|sampler", re.I)),
    (
        "loading",
        re.compile(
            r"state_dict|checkpoint|unpickl|pickle|map_location|torch\.load|load key|safetensors", re.I
        ),
    ),
    ("cuda", re.compile(r"cuda|cudnn|cublas|gpu|device-side|out of memory|kernel image|nvidia|driver", re.I)),
    ("optim", re.compile(r"optimi[sz]er|scheduler|learning rate|\blr\b|param_groups", re.I)),
    ("loss", re.compile(r"grad|backward|autograd|inplace|in-place|\bnan\b|loss|target", re.I)),
    (
        "mismatch",
        re.compile(r"shape|size|dtype|dimension|expected .* got|mat\d|must match|same device", re.I),
    ),
    ("version", re.compile(r"no attribute|no module|deprecat|import|undefined symbol|version|removed", re.I)),
]
FALLBACK = "mismatch"


class DraftError(ValueError):
    """A draft can't be made (no team content folder, an unknown miss)."""


def guess_category(session: Session, miss: MissedSearch) -> str:
    if miss.best_slug and (e := session.get(Entry, miss.best_slug)) is not None and e.category in CATEGORIES:
        return e.category
    for category, pattern in GUESSES:
        if pattern.search(miss.template):
            return category
    return FALLBACK


def slug_for(template: str) -> str:
    message = EXC.sub("", template)
    words = [
        w
        for w in re.findall(r"[a-z0-9]+", message.lower().replace("_num_", " ").replace("_q_", " "))
        if w
        not in {"num", "q", "path", "size", "shape", "hex", "url", "gpu", "symbol", "arch", "the", "a", "an"}
    ]
    return "-".join(words[:6]) or "untitled-error"


def skeleton(miss: MissedSearch, category: str, user: str) -> str:
    """The draft's text: a comment saying what to do, then the entry fields."""
    exc = m.group(1) if (m := EXC.match(miss.template)) else None
    broken_expect = (
        {"outcome": "raised", "exc_type": exc.rsplit(".", 1)[-1]}
        if exc
        else {"outcome": "raised", "exc_type": "RuntimeError"}
    )
    data = {
        "title": EXC.sub("", miss.template).strip()[:200] or miss.template[:200],
        "summary": "",
        "cause": "",
        "fix": "",
        "signatures": [miss.template],
        "tags": [],
        "sources": [],
        "broken": {"code": "", "expect": broken_expect},
        "fixed": {"code": "", "expect": {"outcome": "ok"}},
    }
    header = (
        f"# Draft from a missed search: seen {miss.count} time(s), {miss.first_seen:%Y-%m-%d} to "
        f"{miss.last_seen:%Y-%m-%d}.\n"
        f"# Created by {user} on {utcnow():%Y-%m-%d}. Category guessed: {category} "
        f"({CATEGORIES[category][0]}).\n"
        "# To finish: write summary, cause and fix; a broken snippet that raises this error and a fixed\n"
        "# one that does not; check the signature and the category; then move this file to\n"
        f"# {category}/<slug>.toml in the team content folder (drafts/ is never synced).\n"
        "# The signature's _num_, _path_, _q_ ... are the parts search sets aside: any value matches.\n"
    )
    if miss.example != miss.template:
        header += "# Error lines of the latest such search:\n" + "".join(
            f"#   {ln}\n" for ln in miss.example.split("\n")
        )
    return header + "\n" + tomli_w.dumps(data, multiline_strings=True)


def create(session: Session, team_dir: Path | None, miss_id: int, user: str) -> Path:
    """Write the draft for a miss into `team_dir/drafts/`, note who made it, and return its path."""
    if team_dir is None:
        raise DraftError("no team content folder is set (PITFALLS_TEAM_CONTENT_DIR)")
    miss = session.get(MissedSearch, miss_id)
    if miss is None:
        raise DraftError(f"no missed search {miss_id}")
    category = guess_category(session, miss)
    folder = team_dir / DRAFTS / category
    folder.mkdir(parents=True, exist_ok=True)
    base = slug_for(miss.template)
    path, n = folder / f"{base}.toml", 1
    while path.exists():
        n += 1
        path = folder / f"{base}-{n}.toml"
    path.write_text(skeleton(miss, category, user), encoding="utf-8")
    rel = path.relative_to(team_dir).as_posix()
    miss.draft_path, miss.drafted_by, miss.drafted_at = rel, user, utcnow()
    session.add(miss)
    audit.log(session, user, "draft created", rel, miss.template)
    session.commit()
    return path
