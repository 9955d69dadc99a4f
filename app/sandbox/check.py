"""`python -m app.sandbox.check PATH...`: prove content entries, each snippet in a fresh process.

Needs only the standard library and torch, so it runs on a bare GPU box. Slow (a cold interpreter
per snippet) but simple; `pitfalls verify` does the same through the warm pool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any, TypedDict

from .contracts import Limits, Outcome, as_outcome, verdict
from .execute import finish
from .requirements import unmet

MAX_OUTPUT = Limits().max_output_bytes  # the same cap as a pool run's
PARTS = ("broken", "fixed")


class Row(TypedDict):
    """One file's line of the JSON report (PITFALLS_CHECK_JSON)."""

    file: str
    broken: Outcome
    fixed: Outcome
    status: str


def run_cold(code: str, *, timeout: float = 120, env: dict[str, str] | None = None) -> Outcome:
    """Run one snippet in a fresh interpreter and return its raw outcome."""
    with tempfile.TemporaryDirectory(prefix="pitfalls-check-") as tmp:
        job, res = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
        Path(job).write_text(json.dumps({"code": code}))
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "app.sandbox.execute", job, res],
                check=False,
                capture_output=True,
                timeout=timeout,
                cwd=tmp,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), **(env or {})},
            )
        except subprocess.TimeoutExpired as exc:
            return {
                "outcome": "timeout",
                "reason": f"no result after {timeout}s",
                "warnings": [],
                "stdout": (exc.stdout or b"").decode(errors="replace"),
                "stderr": "",
                "duration_ms": timeout * 1000,
            }
        stdout, stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
        if not os.path.exists(res):
            return {
                "outcome": "crashed",
                "reason": f"exit code {proc.returncode}",
                "warnings": [],
                "duration_ms": round((time.perf_counter() - start) * 1000),
                "stdout": stdout,
                "stderr": stderr,
            }
        try:
            result = as_outcome(json.loads(Path(res).read_text()))
        except ValueError as exc:  # the snippet wrote over its result file
            result = {"outcome": "crashed", "reason": f"a malformed result file: {exc}", "warnings": []}
        result["stdout"], result["stderr"] = stdout, stderr
        return result


def check_snippet(snippet: dict[str, Any] | None, entry: dict[str, Any]) -> Outcome:
    """Run one part of an entry (as read from its TOML file) cold, and judge it."""
    if snippet is None:
        return {"outcome": "skipped", "reason": "no snippet", "expected": None}
    why = unmet(entry.get("requires", {}))
    if why:
        return {"outcome": "skipped", "reason": why, "expected": None}
    raw = run_cold(snippet["code"])
    stdout, stderr = raw.pop("stdout", ""), raw.pop("stderr", "")
    truncated = len(stdout) > MAX_OUTPUT or len(stderr) > MAX_OUTPUT
    check = snippet.get("check", entry.get("check"))
    return finish(
        raw,
        stdout=stdout[:MAX_OUTPUT],
        stderr=stderr[:MAX_OUTPUT],
        truncated=truncated,
        check=check,
        expect=snippet.get("expect"),
    )


def _schema_problem(path: Path) -> str | None:
    """Validate against the content schema when the full app is installed (dev machines, CI).

    A bare GPU box has only torch: there the check runs the snippets without the schema check.
    """
    try:
        from app.content import ContentError, load_file
    except ImportError:
        return None
    try:
        load_file(path.resolve(), path.resolve().parents[1])
    except ContentError as exc:
        return str(exc)
    return None


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or [Path("content")]
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*.toml")))
    failed = 0
    report: list[Row] = []
    files = [f for f in files if f.name != "seed-inventory.toml"]
    for f in files:
        entry = tomllib.loads(f.read_text())
        problem = _schema_problem(f)
        if problem:
            failed += 1
            print(f"fail    {f}\n        schema: {problem}", file=sys.stderr)
            continue
        outcomes = {part: check_snippet(entry.get(part), entry) for part in PARTS}
        status, _ = verdict(outcomes["broken"], outcomes["fixed"])
        failed += status == "fail"
        report.append(
            {"file": str(f), "broken": outcomes["broken"], "fixed": outcomes["fixed"], "status": status}
        )
        print(f"{status:7} {f}", file=sys.stderr)
        for part, r in outcomes.items():
            if r["expected"] is False or "-v" in os.environ.get("PITFALLS_CHECK", ""):
                print(f"        {part}: {r['outcome']} — {r.get('reason')}", file=sys.stderr)
                if r.get("outcome") in ("raised", "crashed") and r["expected"] is False:
                    print(
                        "        "
                        + (r.get("traceback") or r.get("stderr") or "")[-800:].replace("\n", "\n        "),
                        file=sys.stderr,
                    )
    if os.environ.get("PITFALLS_CHECK_JSON"):
        Path(os.environ["PITFALLS_CHECK_JSON"]).write_text(json.dumps(report, indent=1))
    print(f"{len(files) - failed}/{len(files)} not failing", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
