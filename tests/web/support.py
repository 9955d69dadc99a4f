"""Helpers shared by the web tests: constants, DB writers, a live uvicorn server."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Self

import uvicorn
from sqlmodel import Session

from app import runs
from app.models import Entry, Result, Run, utcnow
from app.sandbox.contracts import blank

REPO = Path(__file__).resolve().parents[2]
CONTENT = REPO / "content"
ARTIFACTS = REPO / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# An entry every browser and HTML test leans on: CPU-only, raises on the broken side, ok when fixed.
SLUG = "cross-entropy-target-out-of-range"
TRACEBACK = """\
Epoch 3:  41%|████      | 205/500 [00:12<00:17, 16.9it/s]
Traceback (most recent call last):
  File "/home/ana/projects/segnet/train.py", line 88, in <module>
    main()
  File "/home/ana/projects/segnet/train.py", line 71, in main
    loss = criterion(logits, labels)
  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1553, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/loss.py", line 1188, in forward
    return F.cross_entropy(input, target, weight=self.weight,
  File "/opt/conda/lib/python3.11/site-packages/torch/nn/functional.py", line 3104, in cross_entropy
    return torch._C._nn.cross_entropy_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index, label_smoothing)
IndexError: Target 11 is out of bounds.
"""


HX = {"HX-Request": "true"}


def add_result(app, slug: str, part: str, outcome: dict, *, expected: bool | None = True) -> None:
    """Store an outcome for the entry's *current* snippet, as a worker's result would be."""
    with Session(app.state.engine) as session:
        entry = session.get(Entry, slug)
        snippet = runs.entry_snippets(entry)[part]
        full = {**blank(outcome.get("outcome", "ok"), ""), "expected": expected, **outcome}
        session.add(
            Result(
                entry_slug=slug,
                part=part,
                snippet_hash=runs.snippet_hash(snippet),
                torch_version=str(full.get("torch_version")),
                device=str(full.get("device")),
                outcome=full,
                expected=expected,
                recorded_at=utcnow(),
            )
        )
        session.commit()


def add_run(app, slug: str, *, state: str = "done", results: dict | None = None) -> int:
    """A run row in any state, written straight to the DB (no worker involved)."""
    with Session(app.state.engine) as session:
        run = Run(
            entry_slug=slug,
            state=state,
            job={"snippets": {}},
            results=results or {},
            finished_at=utcnow() if state == "done" else None,
        )
        session.add(run)
        session.commit()
        return run.id


# -- browser ------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """uvicorn serving an app in a background thread (real sockets, real lifespan)."""

    def __init__(self, app, port: int):
        self.url = f"http://127.0.0.1:{port}"
        # as `pitfalls serve`: a worker's open long poll (up to 20 s) does not hold up the shutdown
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
