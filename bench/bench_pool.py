"""Per-run latency: the warm pool against a cold `python -c` subprocess, on the same snippets.

    python bench/bench_pool.py [--cold N] [--warm N] [--burst N] [--json PATH]

Three pool regimes (issue 3 acceptance):
- ready:     a warmed child is waiting (each run starts after the spares are replenished);
- none ready: no spare at all (spare=0): every run forks and warms a child on demand;
- burst:     BURST runs submitted at once to a pool of 2 with 2 spares: `burst` is end-to-end
             (queueing included), `burst_service` from the moment a run gets a slot (the spares are
             used up after the first runs, so most runs fork on demand).
Latency is wall time in the caller, from `pool.run(job)` to the OUTCOME in hand. Uses CUDA
snippets when a GPU is visible. Prints p50/p99 and the ratios; `--json` writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.sandbox.pool import Limits, Pool

CPU_SNIPPETS = {
    "shape_mismatch": "import torch\na = torch.ones(2, 3)\nb = torch.ones(4, 5)\na @ b\n",
    "dtype_mismatch": "import torch\na = torch.ones(3, dtype=torch.float32)\nb = torch.ones(3, dtype=torch.float64)\ntorch.dot(a, b)\n",
    "ok_matmul": "import torch\nprint((torch.ones(64, 64) @ torch.ones(64, 64)).sum().item())\n",
}
CUDA_SNIPPETS = {
    "device_mismatch": "import torch\na = torch.ones(3, device='cuda')\nb = torch.ones(3)\na + b\n",
    "dtype_mismatch": "import torch\na = torch.ones(3, device='cuda')\nb = torch.ones(3, device='cuda', dtype=torch.float64)\ntorch.dot(a, b)\n",
    "ok_matmul": "import torch\nprint((torch.ones(64, 64, device='cuda') @ torch.ones(64, 64, device='cuda')).sum().item())\n",
}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def summary(ms: list[float]) -> dict:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 2),
        "p99_ms": round(pct(ms, 99), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "min_ms": round(min(ms), 2),
        "max_ms": round(max(ms), 2),
    }


def cold(code: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], capture_output=True, cwd="/tmp", check=False)
        out.append((time.perf_counter() - t) * 1000)
    return out


def job(code: str) -> dict:
    return {"code": code, "expect": None, "check": None, "requires": {}, "fresh_process": False}


def warm_ready(pool: Pool, code: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        pool.wait_ready()
        time.sleep(0.05)  # let the replacement's warm-up settle: measure the run, not a neighbour
        t = time.perf_counter()
        r = pool.run(job(code))
        out.append((time.perf_counter() - t) * 1000)
        assert r["outcome"] in ("ok", "raised"), r
    return out


def none_ready(pool: Pool, code: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        time.sleep(0.05)
        t = time.perf_counter()
        r = pool.run(job(code))
        out.append((time.perf_counter() - t) * 1000)
        assert r["outcome"] in ("ok", "raised"), r
    return out


def burst(pool: Pool, code: str, n: int) -> tuple[list[float], list[float], float]:
    """End-to-end latency (queueing included) and service latency (from getting a slot)."""
    pool.wait_ready()
    lat: list[float] = []
    service: list[float] = []
    lock = threading.Lock()

    def one():
        t = time.perf_counter()
        r = pool.run(job(code))
        with lock:
            lat.append((time.perf_counter() - t) * 1000)
            service.append(r["slot_ms"])

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return lat, service, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cold", type=int, default=5, help="cold runs per snippet")
    ap.add_argument("--warm", type=int, default=30, help="pool runs per snippet and regime")
    ap.add_argument("--burst", type=int, default=16, help="runs submitted at once")
    ap.add_argument("--json", help="write the report here")
    args = ap.parse_args(argv)

    pool = Pool(size=2, spare=2, limits=Limits(timeout_s=60))
    t = time.perf_counter()
    pool.start(wait=True)
    start_s = time.perf_counter() - t
    info = pool.info()
    snippets = CUDA_SNIPPETS if info["gpus"] else CPU_SNIPPETS
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "device": info["device"],
        "gpus": info["gpus"],
        "torch_version": info["torch_version"],
        "python": platform.python_version(),
        "pool_start_s": round(start_s, 2),
        "loadavg_at_start": os.getloadavg(),
        "limits_enforced": info["limits_enforced"],
        "snippets": {},
    }
    try:
        for name, code in snippets.items():
            row = {
                "cold": summary(cold(code, args.cold)),
                "ready": summary(warm_ready(pool, code, args.warm)),
            }
            pool.set_spare(0)
            row["none_ready"] = summary(none_ready(pool, code, args.warm))
            pool.set_spare(2)
            lat, service, wall = burst(pool, code, args.burst)
            row["burst"] = {
                **summary(lat),
                "runs": args.burst,
                "wall_s": round(wall, 3),
                "runs_per_s": round(args.burst / wall, 1),
            }
            row["burst_service"] = summary(service)
            for k in ("ready", "none_ready"):
                row[f"ratio_cold_over_{k}_p50"] = round(row["cold"]["p50_ms"] / row[k]["p50_ms"], 1)
            report["snippets"][name] = row
    finally:
        pool.close()
    report["loadavg_at_end"] = os.getloadavg()
    allp = lambda k: [r[k]["p50_ms"] for r in report["snippets"].values()]
    report["overall"] = {
        "cold_p50_ms": round(statistics.median(allp("cold")), 2),
        "ready_p50_ms": round(statistics.median(allp("ready")), 2),
        "none_ready_p50_ms": round(statistics.median(allp("none_ready")), 2),
    }
    o = report["overall"]
    o["ratio_ready"] = round(o["cold_p50_ms"] / o["ready_p50_ms"], 1)
    o["ratio_none_ready"] = round(o["cold_p50_ms"] / o["none_ready_p50_ms"], 1)

    print(
        f"{report['device']} · torch {report['torch_version']} · {report['cpus']} CPUs · "
        f"pool start {report['pool_start_s']} s · load {report['loadavg_at_start'][0]:.1f}"
    )
    print(f"{'snippet':16} {'regime':11} {'p50 ms':>9} {'p99 ms':>9} {'cold/this':>10}")
    for name, row in report["snippets"].items():
        for k in ("cold", "ready", "none_ready", "burst", "burst_service"):
            ratio = row.get(f"ratio_cold_over_{k}_p50", "")
            print(f"{name:16} {k:11} {row[k]['p50_ms']:9.1f} {row[k]['p99_ms']:9.1f} {ratio!s:>10}")
        print(f"{'':16} burst of {row['burst']['runs']}: {row['burst']['runs_per_s']} runs/s")
    print(
        f"overall p50: cold {o['cold_p50_ms']} ms, ready {o['ready_p50_ms']} ms ({o['ratio_ready']}x), "
        f"none ready {o['none_ready_p50_ms']} ms ({o['ratio_none_ready']}x)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
