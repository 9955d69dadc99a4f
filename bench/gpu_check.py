"""GPU acceptance check for the sandbox (issue 3): plain script, standard library + torch only.

    python3 bench/gpu_check.py [--out DIR]

On a CUDA machine: runs a CUDA OOM, the GPU memory cap, a device mismatch, a dtype mismatch and a
device-side assert followed by a normal run through the warm pool; then a remote worker (the agent,
against an in-process fake of the server's lease API) serves the same cases. Prints a report and
writes it as JSON (date, torch version, GPU name, per-case outcome and timing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.sandbox.agent import serve
from app.sandbox.pool import Limits, Pool

RAISED = lambda exc, match: {"outcome": "raised", "exc_type": exc, "match": match}
CASES = [
    (
        "cuda_oom",
        "import torch\nx = torch.empty(200 * 2**30, dtype=torch.uint8, device='cuda')\n",
        RAISED("OutOfMemoryError", "CUDA out of memory"),
        {},
    ),
    (
        "gpu_cap_blocks_60pct",
        (
            "import torch\nn = int(torch.cuda.get_device_properties(0).total_memory * 0.6)\n"
            "x = torch.empty(n, dtype=torch.uint8, device='cuda')\n"
        ),
        RAISED("OutOfMemoryError", "out of memory"),
        {},
    ),
    (
        "gpu_cap_allows_30pct",
        (
            "import torch\nn = int(torch.cuda.get_device_properties(0).total_memory * 0.3)\n"
            "x = torch.empty(n, dtype=torch.uint8, device='cuda')\nprint('allocated', n)\n"
        ),
        {"outcome": "ok"},
        {},
    ),
    (
        "device_mismatch",
        "import torch\na = torch.ones(3, device='cuda')\nb = torch.ones(3)\nprint(a + b)\n",
        RAISED("RuntimeError", "same device"),
        {},
    ),
    (
        "dtype_mismatch",
        (
            "import torch\na = torch.ones(3, device='cuda')\n"
            "b = torch.ones(3, device='cuda', dtype=torch.float64)\nprint(torch.dot(a, b))\n"
        ),
        RAISED("RuntimeError", "dtype"),
        {},
    ),
    (
        "device_side_assert",
        (
            "import torch\nlogits = torch.randn(4, 10, device='cuda')\n"
            "target = torch.tensor([0, 1, 2, 99], device='cuda')\n"
            "loss = torch.nn.functional.cross_entropy(logits, target)\nprint(loss.item())\n"
        ),
        RAISED("RuntimeError", "device-side assert"),
        {},
    ),
    (
        "normal_run_after_assert",
        "import torch\na = torch.ones(64, 64, device='cuda')\nprint((a @ a).sum().item())\n",
        {"outcome": "ok"},
        {},
    ),
    (
        "fresh_process_cuda",
        "import torch\nprint(torch.ones(2, device='cuda').sum().item())\n",
        {"outcome": "ok"},
        {"fresh_process": True},
    ),
    (
        "timeout_on_gpu",
        "import torch, time\nx = torch.ones(1, device='cuda')\ntime.sleep(1000)\n",
        {"outcome": "timeout"},
        {"limits": {"timeout_s": 2}},
    ),
    (
        "segfault_on_gpu",
        "import torch, ctypes\nx = torch.ones(1, device='cuda')\nctypes.string_at(0)\n",
        {"outcome": "crashed"},
        {},
    ),
]
# The same faults as broken/fixed pairs, for the remote worker.
PAIRS = {
    "device_mismatch": (
        "device_mismatch",
        "import torch\na = torch.ones(3, device='cuda')\nb = torch.ones(3).cuda()\nprint(a + b)\n",
    ),
    "dtype_mismatch": (
        "dtype_mismatch",
        (
            "import torch\na = torch.ones(3, device='cuda')\n"
            "b = torch.ones(3, device='cuda', dtype=torch.float64)\nprint(torch.dot(a, b.float()))\n"
        ),
    ),
    "cuda_oom": (
        "cuda_oom",
        "import torch\nx = torch.empty(2**20, dtype=torch.uint8, device='cuda')\nprint('ok')\n",
    ),
    "device_side_assert": (
        "device_side_assert",
        (
            "import torch\nlogits = torch.randn(4, 10, device='cuda')\n"
            "target = torch.tensor([0, 1, 2, 9], device='cuda')\n"
            "print(torch.nn.functional.cross_entropy(logits, target).item())\n"
        ),
    ),
}


def brief(out: dict, wall_ms: float) -> dict:
    return {
        "outcome": out["outcome"],
        "expected": out["expected"],
        "exc_type": out.get("exc_type"),
        "message": (out.get("message") or "")[:240],
        "reason": out.get("reason"),
        "traceback_tail": "\n".join((out.get("traceback") or "").splitlines()[-4:]),
        "cuda_poisoned": out.get("cuda_poisoned", False),
        "device": out.get("device"),
        "stdout": out.get("stdout", "")[:200],
        "wall_ms": round(wall_ms, 1),
        "duration_ms": out.get("duration_ms"),
    }


def pool_cases(pool: Pool) -> dict:
    report = {}
    for name, code, expect, extra in CASES:
        pool.wait_ready(timeout=60)
        t = time.perf_counter()
        out = pool.run({"code": code, "expect": expect, "check": None, "requires": {"cuda": True}, **extra})
        report[name] = brief(out, (time.perf_counter() - t) * 1000)
        if name == "device_side_assert":  # CUDA_LAUNCH_BLOCKING=1: the traceback names the failing line
            report[name]["points_at_line_4"] = "line 4" in (out.get("traceback") or "")
        print(
            f"  {name:26} {out['outcome']:8} expected={out['expected']!s:5} {report[name]['wall_ms']:8.1f} ms  "
            f"{(out.get('exc_type') or '')} {(out.get('message') or out.get('reason') or '')[:90]!r}",
            flush=True,
        )
    return report


class _Fake:
    def __init__(self, jobs):
        self.jobs, self.results, self.lock = list(jobs), [], threading.Lock()
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, obj = 200, {}
                if self.headers.get("Authorization") != "Bearer gpu-check":
                    status, obj = 401, {"detail": "bad token"}
                elif self.path.endswith("/lease"):
                    with fake.lock:
                        obj = fake.jobs.pop(0) if fake.jobs else None
                    if obj is None:
                        time.sleep(0.3)
                        status = 204
                elif self.path.endswith("/result"):
                    with fake.lock:
                        fake.results.append(
                            {"run_id": int(self.path.split("/")[4]), **body, "at": time.perf_counter()}
                        )
                data = b"" if status == 204 else json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the agent aborted its long poll on shutdown
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def remote_worker_cases() -> dict:
    by_name = {name: (code, expect) for name, code, expect, _ in CASES}
    jobs = []
    for i, (name, (broken_case, fixed_code)) in enumerate(PAIRS.items(), 1):
        code, expect = by_name[broken_case]
        jobs.append(
            {
                "run_id": i,
                "lease": f"L{i}",
                "lease_s": 30,
                "requires": {"cuda": True},
                "fresh_process": False,
                "limits": {},
                "name": name,
                "snippets": {
                    "broken": {"code": code, "expect": expect, "check": None},
                    "fixed": {"code": fixed_code, "expect": {"outcome": "ok"}, "check": None},
                },
            }
        )
    fake = _Fake(jobs)
    stop = threading.Event()
    t0 = time.perf_counter()
    th = threading.Thread(
        target=lambda: serve(fake.url, "gpu-check", concurrency=1, spare=1, stop_event=stop, wait_s=1),
        daemon=True,
    )
    th.start()
    deadline = time.monotonic() + 180
    while len(fake.results) < 2 * len(jobs) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    th.join(30)
    names = {j["run_id"]: j["name"] for j in jobs}
    out = {"total_s": round(time.perf_counter() - t0, 2), "runs": {}}
    for r in fake.results:
        res = r["result"]
        out["runs"].setdefault(names[r["run_id"]], {})[r["part"]] = {
            "outcome": res["outcome"],
            "expected": res["expected"],
            "exc_type": res.get("exc_type"),
            "message": (res.get("message") or "")[:200],
            "device": res.get("device"),
            "duration_ms": res.get("duration_ms"),
            "wall_ms": res.get("wall_ms"),
        }
    for name, parts in out["runs"].items():
        for part, r in parts.items():
            print(f"  worker {name:20} {part:6} {r['outcome']:8} expected={r['expected']}", flush=True)
    out["all_expected"] = len(fake.results) == 2 * len(jobs) and all(
        p["expected"] for parts in out["runs"].values() for p in parts.values()
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    import torch  # only for the report's facts; the pool's fork server imports its own

    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
    }
    t = time.perf_counter()
    pool = Pool(size=2, spare=2, limits=Limits(timeout_s=30, gpu_memory_fraction=0.45))
    pool.start(wait=True)
    report["pool_start_s"] = round(time.perf_counter() - t, 2)
    info = pool.info()
    report.update(
        gpu=info["device"],
        gpus=info["gpus"],
        limits_enforced=info["limits_enforced"],
        forkserver_cuda_initialized=pool._server.hello.get("cuda_initialized"),
        forkserver_threads=pool._server.hello.get("threads"),
    )
    print(
        f"{info['device']} · torch {info['torch_version']} · pool start {report['pool_start_s']} s",
        flush=True,
    )
    if not info["gpus"]:
        print("no CUDA GPU visible: nothing to check", flush=True)
        pool.close()
        return 1
    try:
        report["pool_cases"] = pool_cases(pool)
    finally:
        pool.close()
    report["remote_worker"] = remote_worker_cases()
    report["all_expected"] = (
        all(c["expected"] for c in report["pool_cases"].values()) and report["remote_worker"]["all_expected"]
    )
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "gpu_check.json").write_text(json.dumps(report, indent=1))
    print("ALL EXPECTED" if report["all_expected"] else "SOME CASES NOT AS EXPECTED", flush=True)
    return 0 if report["all_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
