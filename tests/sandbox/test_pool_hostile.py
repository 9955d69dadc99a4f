"""Hostile snippets (issue 3 acceptance; STYLE.md item 13): one case per attack, each checking the
reported outcome AND that the very next run on the same pool succeeds."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest


def test_pool_busy_loop_times_out(run, next_run_ok):
    # Burns CPU forever: the wall clock (or RLIMIT_CPU) must stop it.
    out = run("while True:\n    pass\n")
    assert out["outcome"] == "timeout", out
    assert out["wall_ms"] < 5000
    next_run_ok()


def test_pool_cpu_limit_reports_timeout(run, next_run_ok):
    # Burns CPU with a CPU limit below the wall clock: SIGXCPU, reported as a CPU-time timeout.
    out = run("while True:\n    pass\n", limits={"cpu_s": 1, "timeout_s": 2.5})
    assert out["outcome"] == "timeout", out
    assert "CPU time" in out["reason"] or "wall-clock" in out["reason"], out
    next_run_ok()


def test_pool_sleep_forever_times_out(run, next_run_ok):
    # Sleeps without using CPU: only the wall clock catches it.
    start = time.monotonic()
    out = run("import time\ntime.sleep(10**9)\n", limits={"timeout_s": 1})
    assert out["outcome"] == "timeout", out
    assert "wall-clock" in out["reason"]
    assert time.monotonic() - start < 4
    next_run_ok()


def test_pool_allocate_50gb_at_once(run, next_run_ok, enforced):
    # One 50 GB tensor: the allocator refuses it (raised) or the cgroup kills the run (crashed).
    # Without a memory cgroup on a big machine it may just take long: then the wall clock ends it.
    out = run("import torch\nx = torch.ones(50 * 2**30, dtype=torch.uint8)\nprint(x.sum())\n")
    allowed = ("raised", "crashed") if enforced["memory"] else ("raised", "crashed", "timeout", "ok")
    assert out["outcome"] in allowed, out
    if out["outcome"] == "crashed":
        assert out.get("killed_for_memory"), out
    next_run_ok()


def test_pool_memory_hog_killed_for_memory(run, next_run_ok, enforced):
    # Grows towards 50 GB, 128 MB at a time, touching every page: the memory cgroup must stop it.
    if not enforced["memory"]:
        pytest.skip("no memory limit on this host: this would eat the machine's RAM")
    code = "import torch\nkeep = []\nfor _ in range(400):\n    keep.append(torch.ones(2**25))\n"
    out = run(code, limits={"memory_mb": 512, "timeout_s": 20})
    assert out["outcome"] == "crashed", out
    assert out["killed_for_memory"] is True
    assert "memory" in out["reason"]
    next_run_ok()


def test_pool_fork_bomb_contained(run, next_run_ok, enforced, group_pids):
    # Forks without end: pids.max makes fork fail; every copy dies with the run.
    if not enforced["procs"]:
        pytest.skip("no process limit on this host: a fork bomb would take the machine down")
    out = run("import os\nwhile True:\n    os.fork()\n", limits={"timeout_s": 5})
    assert out["outcome"] in ("raised", "timeout"), out
    if out["outcome"] == "raised":
        assert out["exc_type"] == "BlockingIOError", out
    next_run_ok()
    deadline = time.monotonic() + 5
    while group_pids(out["sandbox_pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_pids(out["sandbox_pid"]) == []


def test_pool_print_100mb_truncated(run, next_run_ok, pool):
    # Floods stdout with 100 MB: capture keeps the first max_output_bytes, marks truncated, drains the rest.
    out = run("import sys\nsys.stdout.write('x' * 100_000_000)\nprint('end', file=sys.stderr)\n")
    assert out["outcome"] == "ok", out
    assert out["truncated"] is True
    assert len(out["stdout"]) == pool.limits.max_output_bytes
    assert out["stderr"] == "end\n"
    next_run_ok()


def test_pool_endless_printing_keeps_partial_output(run, next_run_ok):
    # Prints forever: a timeout, with the partial output kept.
    out = run("i = 0\nwhile True:\n    print('line', i)\n    i += 1\n", limits={"timeout_s": 1})
    assert out["outcome"] == "timeout", out
    assert out["stdout"].startswith("line 0\nline 1\n")
    assert out["truncated"] is True
    next_run_ok()


def test_pool_write_10gb_file_refused(run, next_run_ok):
    # Writes a 10 GB file in 1 MB chunks: RLIMIT_FSIZE makes the write fail (EFBIG).
    code = "with open('big.bin', 'wb') as fh:\n    for _ in range(10 * 1024):\n        fh.write(b'\\0' * 2**20)\n"
    out = run(code)
    assert out["outcome"] == "raised", out
    assert out["exc_type"] == "OSError" and "File too large" in out["message"], out
    next_run_ok()


def test_pool_os_exit_is_crashed(run, next_run_ok):
    # Leaves without a word: exit code 3 is reported.
    out = run("import os\nos._exit(3)\n")
    assert out["outcome"] == "crashed", out
    assert out["exit_code"] == 3 and "exit code 3" in out["reason"]
    next_run_ok()


def test_pool_ctypes_segfault_is_crashed(run, next_run_ok):
    # Dereferences NULL through ctypes: SIGSEGV is reported.
    out = run("import ctypes\nctypes.string_at(0)\n")
    assert out["outcome"] == "crashed", out
    assert out["signal"] == "SIGSEGV" and "segmentation fault" in out["reason"]
    next_run_ok()


def test_pool_sys_exit_is_crashed(run, next_run_ok):
    # sys.exit(2) from the snippet: crashed, with the code.
    out = run("import sys\nprint('before')\nsys.exit(2)\n")
    assert out["outcome"] == "crashed", out
    assert "sys.exit(2)" in out["reason"]
    assert out["stdout"] == "before\n"
    next_run_ok()


def test_pool_keyboard_interrupt_is_raised(run, next_run_ok):
    # Raises KeyboardInterrupt (a BaseException): reported, not swallowed, pool unaffected.
    out = run("raise KeyboardInterrupt\n")
    assert out["outcome"] == "raised", out
    assert out["exc_type"] == "KeyboardInterrupt"
    next_run_ok()


def test_pool_closed_stdout(run, next_run_ok):
    # Closes sys.stdout, then prints: the snippet's own ValueError.
    out = run("import sys\nsys.stdout.close()\nprint('x')\n")
    assert out["outcome"] == "raised", out
    assert out["exc_type"] == "ValueError"
    next_run_ok()


def test_pool_closed_stdio_fds(run, next_run_ok):
    # Closes fds 1 and 2 underneath Python.
    out = run("import os, sys\nos.close(1)\nos.close(2)\nprint('gone')\n")
    assert out["outcome"] in ("ok", "raised"), out
    next_run_ok()


def test_pool_redirected_stdout(run, next_run_ok):
    # Redirects stdout at the Python level and at the fd level.
    out = run(
        "import io, os, sys\nsys.stdout = io.StringIO()\nprint('hidden')\n"
        "fd = os.open(os.devnull, os.O_WRONLY)\nos.dup2(fd, 2)\nprint('also hidden', file=sys.stderr)\n"
    )
    assert out["outcome"] == "ok", out
    assert out["stdout"] == "" and out["stderr"] == ""
    next_run_ok()


def test_pool_closed_result_channel(run, next_run_ok):
    # Closes every descriptor above stderr, the sandbox's own channel included.
    out = run("import os\nos.closerange(3, 65536)\nprint('still here')\n")
    assert out["outcome"] == "crashed", out
    assert "channel" in out["reason"], out
    assert out["stdout"] == "still here\n"
    next_run_ok()


def test_pool_global_state_does_not_leak(run, next_run_ok, pool):
    # Flips torch-wide switches and patches the stdlib; the next run must see none of it.
    hostile = """
import json, torch
torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)
torch.backends.cudnn.enabled = False
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True
torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
torch.manual_seed(1234)
json.dumps = None
print('flipped')
"""
    probe = """
import json, torch
print(json.dumps([
    str(torch.get_default_dtype()), torch.is_grad_enabled(), torch.backends.cudnn.enabled,
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
    torch.are_deterministic_algorithms_enabled(), torch.get_num_threads(), torch.rand(1).item(),
]))
"""
    before = run(probe)
    assert before["outcome"] == "ok", before
    assert before["stdout"].startswith('["torch.float32", true, true, false, false, false, '), before
    assert run(hostile)["outcome"] == "ok"
    out = run(probe)
    assert out["outcome"] == "ok", out
    assert out["stdout"] != "" and out["stdout"].rsplit(",", 1)[0] == before["stdout"].rsplit(",", 1)[0], out
    next_run_ok()


def test_pool_escaped_grandchild_is_killed(run, next_run_ok, enforced):
    # Starts a daemon in its own session (escaping the process group): the run's cgroup still kills it.
    if not enforced["procs"]:
        pytest.skip("no cgroup on this host: escaping the process group is not caught")
    code = (
        "import os, sys, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    time.sleep(1000)\n"
        "    os._exit(0)\nprint(pid)\n"
    )
    out = run(code)
    assert out["outcome"] == "ok", out
    pid = int(re.findall(r"\d+", out["stdout"])[0])
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    state = (
        Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if os.path.exists(f"/proc/{pid}")
        else "gone"
    )
    assert state in ("gone", "Z")
    next_run_ok()


def test_pool_no_network(run, next_run_ok, enforced):
    # Reaches for the outside world: no route; loopback still works (gloo/multiprocessing need it).
    if not enforced["network"]:
        pytest.skip("this host cannot take the network away")
    out = run("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\n")
    assert out["outcome"] == "raised" and out["exc_type"] in ("OSError", "TimeoutError"), out
    loop = (
        "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
        "c = socket.create_connection(s.getsockname())\nprint('loopback ok')\nc.close()\ns.close()\n"
    )
    out = run(loop)
    assert out["outcome"] == "ok" and out["stdout"] == "loopback ok\n", out
    next_run_ok()


def test_pool_huge_warning_and_exception_message_are_capped(run, next_run_ok):
    out = run("import warnings\nwarnings.warn('w' * 30_000_000)\nraise ValueError('v' * 30_000_000)")
    assert out["outcome"] == "raised" and out["exc_type"] == "ValueError"
    assert len(out["message"]) < 70_000
    assert all(len(w["message"]) < 10_000 for w in out["warnings"])
    next_run_ok()


# Writes a frame of its own on the sandbox's result channel (the child's socket is in the snippet's
# process): what arrives must become a crashed run, never an exception out of `Pool.run`.
_FORGE = (
    "import os, stat, struct, time\n"
    "for fd in range(3, 256):\n"
    "    try:\n"
    "        if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
    "            os.write(fd, {frame!r})\n"
    "    except OSError:\n"
    "        pass\n"
    "time.sleep(0.5)\n"
)


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (_frame(b"[1, 2]"), "not a JSON object"),
        (_frame(b"{nope"), "Expecting property name"),
        (_frame(b'{"nfds": "x"}'), "nfds"),
        ((1 << 30).to_bytes(4, "big"), "message of"),
        (_frame(b'{"op": "result", "result": "ok"}'), "not a JSON object"),
        (_frame(b'{"op": "result", "result": {"outcome": "fine"}}'), "no known outcome"),
        (_frame(b'{"op": "result", "result": {"outcome": "ok", "warnings": [3]}}'), "warnings"),
    ],
    ids=["list", "bad-json", "bad-nfds", "huge", "result-not-object", "unknown-outcome", "bad-warnings"],
)
def test_pool_forged_result_channel_is_crashed(run, next_run_ok, frame, why):
    out = run(_FORGE.format(frame=frame))
    assert out["outcome"] == "crashed", out
    assert "result channel" in out["reason"] and why in out["reason"], out
    next_run_ok()


def test_pool_forged_result_is_judged(run, next_run_ok):
    # A well-formed result is the snippet's to claim (it runs in the reporting process): judged as sent.
    frame = _frame(b'{"op": "result", "result": {"outcome": "ok"}}')
    out = run(_FORGE.format(frame=frame), expect={"outcome": "raised"})
    assert out["outcome"] == "ok" and out["expected"] is False, out
    next_run_ok()


def test_pool_fresh_process_forged_result_file_is_crashed(run, next_run_ok):
    # A cold child's result file is in the snippet's own folder: it can write it and exit 0.
    code = "import os\nwith open('.result.json', 'w') as fh:\n    fh.write('[1]')\nos._exit(0)\n"
    out = run(code, fresh_process=True)
    assert out["outcome"] == "crashed", out
    assert "result file is malformed" in out["reason"], out
    next_run_ok()
