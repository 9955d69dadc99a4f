"""Verify the entries that need a GPU (and the environment diagnostics) on a real CUDA machine.

    python bench/gpu_verify.py --out bench/results   # writes gpu-verify.{json,md}

Standard library + torch only (a bare GPU box has nothing else). Each snippet runs in a fresh
interpreter through `app.sandbox.check`; the report records the date, torch version, GPU name and
each entry's outcome, as JSON and as a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.sandbox.check import check_snippet  # noqa: E402
from app.sandbox.contracts import verdict  # noqa: E402


def selected(content: Path) -> list[Path]:
    out = []
    for path in sorted(content.glob("*/*.toml")):
        req = tomllib.loads(path.read_text()).get("requires", {})
        if req.get("cuda") or req.get("gpus") or req.get("reproducible") is False:
            out.append(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--content", default=str(ROOT / "content"))
    ap.add_argument("--jobs", type=int, default=1, help="entries checked at once (each in fresh processes)")
    args = ap.parse_args()
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA GPU"
    rows = []

    def check(path: Path) -> tuple[Path, dict, dict, dict]:
        entry = tomllib.loads(path.read_text())
        return (
            path,
            entry,
            check_snippet(entry.get("broken"), entry),
            check_snippet(entry.get("fixed"), entry),
        )

    with ThreadPoolExecutor(max(1, args.jobs)) as ex:
        checked = ex.map(check, selected(Path(args.content)))
        for path, entry, broken, fixed in checked:
            status, _ = verdict(broken, fixed)
            rows.append(
                {
                    "entry": f"{path.parent.name}/{path.stem}",
                    "status": status,
                    "needs": entry.get("requires", {}),
                    "broken": {
                        k: broken.get(k)
                        for k in ("outcome", "exc_type", "message", "duration_ms", "reason", "stdout")
                    },
                    "fixed": {
                        k: fixed.get(k) for k in ("outcome", "exc_type", "message", "duration_ms", "reason")
                    },
                }
            )
            write(args.out, gpu, rows, torch)  # after each entry: a cut-off run still leaves its report
            print(
                f"{status:8} {rows[-1]['entry']}: broken {broken.get('outcome')}, fixed {fixed.get('outcome')}"
                + (f" -- {broken.get('reason')} / {fixed.get('reason')}" if status == "fail" else ""),
                flush=True,
            )
    report = write(args.out, gpu, rows, torch)
    print(json.dumps(report["summary"]))
    return 1 if report["summary"]["fail"] else 0


def write(out_dir: str, gpu: str, rows: list[dict], torch) -> dict:
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "gpu": gpu,
        "gpus": torch.cuda.device_count(),
        "summary": {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "skipped")},
        "entries": rows,
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-verify.json").write_text(json.dumps(report, indent=1))
    lines = [
        f"# GPU verification — {report['date']}",
        "",
        f"torch {report['torch_version']} on {gpu} ({report['gpus']} GPU); summary: {report['summary']}",
        "",
        "| entry | status | broken | fixed | note |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        note = (r["broken"].get("reason") or "") if r["status"] != "pass" else ""
        lines.append(
            f"| {r['entry']} | {r['status']} | {r['broken']['outcome']} | {r['fixed']['outcome']} | "
            f"{note[:120].replace('|', '/')} |"
        )
    (out / "gpu-verify.md").write_text("\n".join(lines) + "\n")
    return report


if __name__ == "__main__":
    sys.exit(main())
