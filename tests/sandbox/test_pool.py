"""The pool's contract: outcomes and judging, concurrency, crashes, cold children, facts."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.sandbox import wire
from app.sandbox.contracts import Limits, as_outcome, blank, died_by_signal, ran_out_of_time
from app.sandbox.pool import PoolFull

from .conftest import _named

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = {
    "outcome",
    "exc_type",
    "message",
    "traceback",
    "warnings",
    "stdout",
    "stderr",
    "truncated",
    "duration_ms",
    "device",
    "torch_version",
    "expected",
    "reason",
}


def test_pool_outcome_has_contract_fields(run):
    out = run("print('hello')")
    assert set(out) >= CONTRACT, CONTRACT - set(out)
    assert out["outcome"] == "ok" and out["stdout"] == "hello\n" and out["expected"] is True
    assert out["device"] == "cpu" or out["device"]
    assert out["torch_version"]


def test_pool_raised_is_judged_and_trimmed(run):
    code = "import torch\na = torch.ones(2, 3)\nb = torch.ones(4, 5)\nc = a @ b\n"
    out = run(code, expect={"outcome": "raised", "exc_type": "RuntimeError", "match": "cannot be multiplied"})
    assert out["outcome"] == "raised" and out["expected"] is True, out
    assert 'File "snippet.py", line 4' in out["traceback"]
    assert "site-packages" not in out["traceback"]


def test_deprecation_warnings_count_as_python_shows_them_only_from_the_snippet(run):
    """Python hides a DeprecationWarning a library raises (on 3.12, os.fork's "multi-threaded" one on
    every DataLoader worker start) and any ResourceWarning; one the snippet's own code raises is shown,
    and so recorded."""
    library = (
        "import warnings\n"
        "open(__file__)\n"  # an unclosed file: ResourceWarning
        "warnings.warn('unclosed', ResourceWarning)\n"
        "exec(\"import warnings\\nwarnings.warn('old api', DeprecationWarning)\", {'__name__': 'somelib'})\n"
        "exec(\"import warnings\\nwarnings.warn('older api', PendingDeprecationWarning)\", {'__name__': 'somelib'})\n"
        "print('done')\n"
    )
    out = run(library, expect={"outcome": "ok"})
    assert out["outcome"] == "ok" and out["warnings"] == [] and out["expected"] is True, out
    own = "import warnings\nwarnings.warn('my old api', DeprecationWarning)\n"
    out = run(own, expect={"outcome": "warned", "warning": "DeprecationWarning", "match": "my old api"})
    assert out["outcome"] == "warned" and out["expected"] is True, out
    assert out["warnings"][0]["line"] == 2, out


def test_pool_warned_and_wrong(run):
    out = run(
        "import warnings\nwarnings.warn('careful', UserWarning)\n",
        expect={"outcome": "warned", "warning": "UserWarning", "match": "careful"},
    )
    assert out["outcome"] == "warned" and out["expected"] is True, out
    out = run("print('loss=nan')", check=r"loss=\d", expect={"outcome": "wrong"})
    assert out["outcome"] == "wrong" and out["expected"] is True, out
    out = run("print('loss=nan')", check=r"loss=\d", expect={"outcome": "ok"})
    assert out["expected"] is False and "expected ok, got wrong" in out["reason"]


def test_pool_requirements_unmet_are_skipped(pool, run):
    if pool.gpus:
        pytest.skip("this machine has a GPU")
    start = time.monotonic()
    out = run(
        "import torch\ntorch.zeros(1, device='cuda')", requires={"cuda": True}, expect={"outcome": "ok"}
    )
    assert out["outcome"] == "skipped" and out["expected"] is None, out
    assert "needs 1 CUDA GPU" in out["reason"]
    out = run("import onnx", requires={"packages": ["surely_not_installed_pkg"]})
    assert out["outcome"] == "skipped" and "surely_not_installed_pkg" in out["reason"]
    assert time.monotonic() - start < 1


def test_pool_limits_are_clamped_with_a_note(run, pool):
    out = run("print(1)", limits={"timeout_s": 10_000, "memory_mb": 64, "network": True, "bogus": 1})
    assert out["outcome"] == "ok"
    assert out["limits"]["timeout_s"] == pool.limits.timeout_s
    assert out["limits"]["memory_mb"] == 64
    assert out["limits"]["network"] is False
    notes = " ".join(out["limit_notes"])
    assert "timeout_s" in notes and "network" in notes and "bogus" in notes


def test_limits_clamp_unit():
    top = Limits(timeout_s=10, memory_mb=1000, network=True)
    got, notes = top.clamp({"timeout_s": 3, "memory_mb": "2000", "network": False, "cpu_s": "x"})
    assert got.timeout_s == 3 and got.memory_mb == 1000 and got.network is False
    assert any("memory_mb" in n for n in notes) and any("cpu_s" in n for n in notes)


def test_limits_as_dict_is_the_dataclass():
    # the JSON a job message and an outcome carry: every field, in the dataclass's order
    limits = Limits(timeout_s=3, network=True)
    assert list(limits.as_dict().items()) == list(dataclasses.asdict(limits).items())


def test_as_outcome_checks_what_judging_reads():
    good = {"outcome": "raised", "exc_type": "ValueError", "exc_names": ["ValueError"], "warnings": []}
    assert as_outcome(good) is good
    for bad in (
        [1],
        {"outcome": "fine"},
        {"outcome": "ok", "message": 3},
        {"outcome": "ok", "exc_names": "ValueError"},
        {"outcome": "ok", "warnings": [{"category": "UserWarning", "message": None}]},
    ):
        with pytest.raises(ValueError):
            as_outcome(bad)


def test_wire_reader_refuses_malformed_frames():
    for payload in (b"[1]", b"{nope", b'{"nfds": -1}'):
        a, b = socket.socketpair()
        with a, b:
            a.sendall(len(payload).to_bytes(4, "big") + payload)
            with pytest.raises(ValueError):
                wire.Reader(b).feed()


def test_pool_sigkill_mid_run_is_crashed(run, next_run_ok):
    # Something outside kills the sandbox process mid-run (OOM killer, an operator). The snippet
    # cannot write outside its own folder: it names itself (PR_SET_NAME) so that we find it.
    name = f"pf-k{uuid.uuid4().hex[:10]}"
    code = f"import ctypes, time\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\ntime.sleep(30)\n"
    result = {}
    t = threading.Thread(target=lambda: result.update(run(code, limits={"timeout_s": 20})))
    t.start()
    deadline = time.monotonic() + 10
    while not (found := _named(name)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(found[0], signal.SIGKILL)
    t.join(10)
    assert not t.is_alive()
    assert result["outcome"] == "crashed", result
    assert result["signal"] == "SIGKILL" and "SIGKILL" in result["reason"]
    next_run_ok()


def test_pool_200_concurrent_runs(pool):
    # 200 requests at once against a pool of 2: every one finishes with ITS OWN output.
    def one(i: int) -> dict:
        return pool.run({"code": f"print({i})", "expect": {"outcome": "ok"}, "check": rf"^{i}\n$"})

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=200) as ex:
        outs = list(ex.map(one, range(200)))
    elapsed = time.monotonic() - start
    assert [o["stdout"] for o in outs] == [f"{i}\n" for i in range(200)]
    assert all(o["outcome"] == "ok" and o["expected"] for o in outs)
    assert elapsed < 60, elapsed


def test_pool_queue_limit_refuses_cleanly(pool):
    # A bounded queue: the excess is refused at once with PoolFull (HTTP 429/503), never lost.
    old = pool.queue_limit
    pool.queue_limit = 3
    results, refused = [], []

    def one(_):
        try:
            results.append(pool.run({"code": "import time\ntime.sleep(0.3)\nprint('done')"}))
        except PoolFull:
            refused.append(1)

    try:
        with ThreadPoolExecutor(max_workers=20) as ex:
            list(ex.map(one, range(20)))
    finally:
        pool.queue_limit = old
    assert len(results) + len(refused) == 20
    assert refused and len(results) >= 5
    assert all(r["outcome"] == "ok" for r in results)


def test_pool_fresh_process_gets_cold_child(run):
    code = "import os, sys\nprint('torch' in sys.modules, os.environ.get('CUDA_LAUNCH_BLOCKING'))\nraise ValueError('cold')"
    out = run(code, fresh_process=True, expect={"outcome": "raised", "exc_type": "ValueError"})
    assert out["fresh_process"] is True
    assert out["outcome"] == "raised" and out["expected"] is True, out
    assert out["stdout"] == "True 1\n"
    assert 'File "snippet.py", line 3' in out["traceback"]


def test_pool_fresh_process_timeout(run, next_run_ok):
    out = run(
        "import time\ntime.sleep(10**9)", fresh_process=True, limits={"timeout_s": 0.5, "cold_start_s": 0.5}
    )
    assert out["outcome"] == "timeout", out
    next_run_ok()


def test_pool_survives_fork_server_death(pool, next_run_ok):
    # The fork server itself is killed: the next run restarts it.
    old = pool._server.pid
    pool._server.kill()
    next_run_ok()
    next_run_ok()
    assert pool._server.pid != old


def test_pool_parent_stays_clean(pool):
    # DESIGN.md: the forking parent imported torch but never initialised CUDA.
    assert pool._server.hello["cuda_initialized"] is False
    assert pool._server.hello["torch_version"]


def test_pool_info_reports_enforcement(pool):
    info = pool.info()
    assert {"device", "torch_version", "gpus", "limits_enforced"} <= set(info)
    for key in ("timeout", "cpu", "memory", "procs", "output", "file_size", "gpu_memory", "network"):
        assert isinstance(info["limits_enforced"][key]["enforced"], bool)
        assert info["limits_enforced"][key]["how"]


def test_sandbox_import_boundary():
    # The sandbox must load on a bare GPU box: no web stack; the pool module not even torch.
    code = (
        "import sys, app.sandbox.pool, app.sandbox.agent, app.sandbox.check\n"
        "bad = [m for m in ('fastapi', 'pydantic', 'sqlmodel', 'starlette', 'jinja2', 'rich', 'torch')"
        " if m in sys.modules]\nprint(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_pool_close_leaves_nothing_behind():
    from app.sandbox.pool import Pool

    p = Pool(size=1, spare=1, limits=Limits(timeout_s=2))
    p.start()
    assert p.run({"code": "print(1)"})["stdout"] == "1\n"
    p.wait_ready()
    server = p._server.pid
    spares = [c.pid for c in p._ready]
    p.close()
    for pid in [server, *spares]:
        assert (
            not os.path.exists(f"/proc/{pid}")
            or Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
        )


def test_pool_snippets_never_see_secrets(monkeypatch):
    """The worker token (and anything else that looks like a secret) stays out of every snippet."""
    monkeypatch.setenv("PITFALLS_WORKER_TOKEN", "tok-123-secret")
    monkeypatch.setenv("PITFALLS_DATABASE_URL", "postgresql://u:pw@db/p")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("PITFALLS_HARMLESS", "visible")
    from app.sandbox.pool import Pool
    from tests.sandbox.conftest import TEST_LIMITS

    p = Pool(size=1, spare=1, limits=TEST_LIMITS)
    p.start(wait=True)
    try:
        code = "import os\nprint(sorted(k for k in os.environ if k.startswith(('PITFALLS', 'AWS'))))"
        for fresh in (False, True):
            out = p.run({"code": code, "expect": None, "check": None, "requires": {}, "fresh_process": fresh})
            assert out["outcome"] == "ok", out
            seen = out["stdout"]
            assert "PITFALLS_HARMLESS" in seen, (fresh, seen)
            for secret in ("PITFALLS_WORKER_TOKEN", "PITFALLS_DATABASE_URL", "AWS_SECRET_ACCESS_KEY"):
                assert secret not in seen, (fresh, seen)
    finally:
        p.close()


def test_pool_background_failure_is_logged(caplog):
    # A spare cannot be forked (the fork server will not start again): the replenisher says so in
    # the log, with the exception, and keeps trying instead of dying silently.
    from app.sandbox.pool import Pool

    p = Pool(size=1, spare=0, limits=Limits(timeout_s=2))
    try:
        p.start()
        p._server.python = "/nonexistent/python"
        p._server.kill()
        with caplog.at_level(logging.ERROR, logger="pitfalls.sandbox"):
            p.set_spare(1)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not any(r.exc_info for r in caplog.records):
                time.sleep(0.05)
        logged = [r for r in caplog.records if "could not fork a spare" in r.getMessage()]
        assert logged and logged[0].exc_info, caplog.text
    finally:
        p.close()


def test_pool_warm_up_failure_is_logged_once(monkeypatch, caplog):
    # A child that fails while warming up (on an H100, CUDA could not start under a read-only
    # /proc; here, a uid setting that is not a number) is retired and retried with back-off, and
    # the log says why, once, instead of the pool waiting in silence for a spare that never comes.
    if os.geteuid() != 0:
        pytest.skip("the uid setting is used only by a root server")
    from app.sandbox.pool import Pool
    from tests.sandbox.conftest import TEST_LIMITS

    monkeypatch.setenv("PITFALLS_SANDBOX_UID", "nobody")  # a name where a number is expected
    p = Pool(size=1, spare=1, limits=TEST_LIMITS)
    try:
        with caplog.at_level(logging.WARNING, logger="pitfalls.sandbox"):
            p.start(wait=False)
            assert not p.wait_ready(timeout=4)
        warned = [r.getMessage() for r in caplog.records if "failed to warm up" in r.getMessage()]
        assert len(warned) == 1, caplog.text
        assert "invalid literal for int() with base 10: 'nobody'" in warned[0]
        device = p.info(timeout=10)["device"]  # what the worker and `pitfalls doctor` report
        assert device.startswith("none: sandbox children fail to warm up") and "'nobody'" in device, device
    finally:
        p.close()


def test_pool_closed_while_a_spare_warms_up_logs_no_failure(caplog):
    # Closing the pool kills the spare that is still importing torch: that is shutdown, not a
    # failed warm-up (an H200 run logged "no ready message within 120 s" ten seconds in).
    from app.sandbox.pool import Pool
    from tests.sandbox.conftest import TEST_LIMITS

    p = Pool(size=1, spare=1, limits=TEST_LIMITS)
    with caplog.at_level(logging.WARNING, logger="pitfalls.sandbox"):
        p.start(wait=False)
        deadline = time.monotonic() + 10
        while not p._warming and time.monotonic() < deadline:
            time.sleep(0.01)
        assert p._warming, "no spare started warming up"
        p.close()
    assert "failed to warm up" not in caplog.text, caplog.text


@pytest.mark.parametrize(
    "outcome, why",
    [
        # torch.multiprocessing's report of a child's death (a gloo teardown race), in the exception
        (
            {**blank("raised", "expected ok"), "message": "process 1 terminated with signal SIGABRT"},
            "process 1 terminated with signal SIGABRT",
        ),
        # a DataLoader's SIGCHLD handler raising after the snippet, in the sandbox's own code
        (
            blank(
                "crashed",
                "the sandbox process failed before the snippet ran: RuntimeError: DataLoader worker "
                "(pid 18362) is killed by signal: Segmentation fault.",
            ),
            "DataLoader worker (pid 18362) is killed by signal: Segmentation fault",
        ),
    ],
)
def test_a_part_one_of_whose_processes_a_signal_killed_says_which(outcome, why):
    assert died_by_signal({**outcome, "expected": False}) == why


def test_a_part_that_ran_out_of_wall_clock_time_says_so_unless_the_entry_expects_it():
    slow = blank("timeout", "wall-clock limit of 30s exceeded; the process group was killed")
    assert "wall-clock limit of 30s" in (ran_out_of_time({**slow, "expected": False}) or "")
    assert ran_out_of_time({**slow, "expected": True}) is None  # (an entry about a hang)
    assert ran_out_of_time({**blank("raised", "RuntimeError: shapes differ"), "expected": False}) is None


def test_a_part_that_failed_otherwise_was_not_killed_by_a_signal():
    assert died_by_signal({**blank("raised", "RuntimeError: shapes differ"), "expected": False}) is None
    killed = {**blank("crashed", "process 1 terminated with signal SIGABRT"), "expected": True}
    assert died_by_signal(killed) is None  # (it did what the entry says)
