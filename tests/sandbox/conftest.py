"""Fixtures for the sandbox tests: one real pool (real fork server, real torch) shared by the session.

Small limits keep the hostile cases quick on a 2-core machine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.sandbox.pool import Limits, Pool

TEST_LIMITS = Limits(
    timeout_s=2.5,
    cpu_s=10,
    memory_mb=1024,
    max_procs=128,
    max_output_bytes=64 * 1024,
    max_file_mb=8,
    gpu_memory_fraction=0.3,
    network=False,
    cold_start_s=60,
)


@pytest.fixture(scope="session")
def pool():
    p = Pool(size=2, spare=2, limits=TEST_LIMITS)
    p.start(wait=True)
    yield p
    p.close()


@pytest.fixture(scope="session")
def enforced(pool):
    return {k: v["enforced"] for k, v in pool.info()["limits_enforced"].items()}


def _run(pool, code: str, **job) -> dict:
    return pool.run(
        {"code": code, "expect": None, "check": None, "requires": {}, "fresh_process": False, **job}
    )


@pytest.fixture
def run(pool):
    """run(code, **job) -> OUTCOME on the shared pool."""
    return lambda code, **job: _run(pool, code, **job)


@pytest.fixture
def next_run_ok(pool):
    """Assert that the very next run on the same pool works and sees a pristine torch."""

    def check() -> None:
        out = _run(pool, "import torch\nprint('next', torch.ones(2).sum().item())")
        assert out["outcome"] == "ok", out
        assert out["stdout"] == "next 2.0\n", out

    return check


def pids_in_group(pgid: int) -> list[int]:
    """Live processes whose process group is `pgid` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.fixture
def group_pids():
    return pids_in_group


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _named(name: str) -> list[int]:
    """Live processes whose comm is `name` (PR_SET_NAME keeps 15 bytes)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                comm = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue
            if comm == name[:15] and _alive(int(entry)):
                found.append(int(entry))
    return found
