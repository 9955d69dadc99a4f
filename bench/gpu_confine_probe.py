"""Which part of the sandbox's confinement stops CUDA in a forked child? (device diagnostic)

    python3 bench/gpu_confine_probe.py OUTDIR

Each variant runs in its own interpreter that imports torch like the fork server, forks, applies
one part of `isolate.confine` in the forked child, then warms up CUDA as a warm child does.
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VARIANTS = ["none", "full", "userns", "setuid", "mounts", "home", "netns", "mounts_setuid"]
# the parts of `_private_mounts`, and read-only everywhere but one tree
SPLIT = [
    "full",
    "ro_but_proc_top",
    "ro_only",
    "tmp_only",
    "shm_only",
    "ro_but_dev",
    "ro_but_proc",
    "ro_but_sys",
    "ro_but_all3",
    "full_dev_rw",
]


def apply(variant: str, workdir: str) -> object:
    from app.sandbox import isolate

    rw = {"ro_but_dev": ["/dev"], "ro_but_proc": ["/proc"], "ro_but_sys": ["/sys"]}
    rw["ro_but_all3"] = ["/dev", "/proc", "/sys"]
    if variant == "ro_but_proc_top":
        isolate._unshare(isolate.CLONE_NEWNS)
        isolate._mount(None, "/", None, isolate.MS_REC | isolate.MS_PRIVATE)
        isolate._setattr("/", set_=isolate.MOUNT_ATTR_RDONLY, recursive=True)
        isolate._setattr("/proc", clr=isolate.MOUNT_ATTR_RDONLY)
        return None
    if variant == "ro_only" or variant in rw:
        isolate._unshare(isolate.CLONE_NEWNS)
        isolate._mount(None, "/", None, isolate.MS_REC | isolate.MS_PRIVATE)
        isolate._setattr("/", set_=isolate.MOUNT_ATTR_RDONLY, recursive=True)
        for path in rw.get(variant, []):
            isolate._setattr(path, clr=isolate.MOUNT_ATTR_RDONLY, recursive=True)
        return None
    if variant in ("tmp_only", "shm_only"):
        isolate._unshare(isolate.CLONE_NEWNS)
        isolate._mount(None, "/", None, isolate.MS_REC | isolate.MS_PRIVATE)
        isolate._cover("/tmp" if variant == "tmp_only" else "/dev/shm", "mode=1777,size=64m")
        return None
    if variant == "full_dev_rw":
        private = isolate._private_mounts

        def patched(workdir: str | None, tmp_mb: int) -> None:
            private(workdir, tmp_mb)
            isolate._setattr("/dev", clr=isolate.MOUNT_ATTR_RDONLY, recursive=True)

        isolate._private_mounts = patched
        return isolate.confine(network=False, workdir=workdir)
    if variant == "full":
        return isolate.confine(network=False, workdir=workdir)
    if variant == "userns":
        os.environ[isolate.ENV_CONFINE] = "userns"
        return isolate.confine(network=False, workdir=workdir)
    if variant in ("mounts", "mounts_setuid"):
        isolate._unshare(isolate.CLONE_NEWNS)
        isolate._private_mounts(workdir, 1024)
    if variant == "home":
        isolate._unshare(isolate.CLONE_NEWNS)
        return isolate._hide_home()
    if variant == "netns":
        isolate._unshare(isolate.CLONE_NEWNET)
    if variant in ("setuid", "mounts_setuid"):
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
    return None


def one(variant: str) -> int:
    """Runs in a subprocess: import torch, fork, confine, warm up CUDA; one JSON line out."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch  # noqa: F401

    from app.sandbox.child import _warm
    from app.sandbox.requirements import gpu_count

    gpus = gpu_count()
    workdir = tempfile.mkdtemp()
    os.chmod(workdir, 0o777)
    pid = os.fork()
    if pid == 0:
        faulthandler.dump_traceback_later(40, exit=True)
        t0 = time.perf_counter()
        out: dict = {"variant": variant, "gpus": gpus}
        try:
            out["confine"] = apply(variant, workdir)
            out["uid"] = os.getuid()
            out["device"] = _warm("full", gpus, 0.3)
            out["ok"] = True
        except BaseException as exc:  # noqa: BLE001
            out["ok"] = False
            out["error"] = f"{type(exc).__name__}: {exc}"[:1500]
        out["s"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(out, default=str), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return 0 if status == 0 else 1


def pool_child() -> int:
    """One warm child forked through the real pool: its ready message or its warm-up error."""
    from app.sandbox.pool import Limits, Pool

    pool = Pool(size=1, spare=0, limits=Limits(timeout_s=20))
    pool.start(wait=False)
    child = pool._fork("full", pool.limits)
    ok = child is not None and pool._await_ready(child, 60)
    print(
        json.dumps(
            {"ready": ok, "info": child and child.ready_info, "error": child and child.error}, default=str
        )
    )
    if ok:
        out = pool.run({"code": "import torch\nprint(torch.ones(2, device='cuda').sum().item())\n"})
        print(json.dumps({k: out.get(k) for k in ("outcome", "stdout", "message", "device", "duration_ms")}))
    pool.close()
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--pool":
        return pool_child()
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        return one(sys.argv[2])
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")  # [--split]
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = {
        v: subprocess.Popen(
            [sys.executable, __file__, "--one", v],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for v in (SPLIT if "--split" in sys.argv else VARIANTS)
    }
    results = []
    for v, p in procs.items():
        try:
            so, se = p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
            so += "\n(killed after 90 s)"
        results.append({"variant": v, "stdout": so[-3000:], "stderr": se[-3000:]})
        print(f"== {v}\n{so.strip()}\n{se.strip()[-1500:]}", flush=True)
    (out / "confine-probe.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
