"""Decide whether a snippet's outcome is what its entry says it should be."""

from __future__ import annotations

import re

OUTCOMES = ("raised", "warned", "ok", "wrong", "timeout", "crashed", "skipped")


def judge(outcome: dict, expect: dict | None) -> tuple[bool | None, str]:
    """Return (expected, reason). `expected` is None when there is nothing to judge (skipped)."""
    got = outcome.get("outcome")
    if got == "skipped":
        return None, outcome.get("reason") or "skipped"
    if not expect:
        return True, "no expectation declared"
    want = expect.get("outcome", "ok")
    if got != want:
        detail = ""
        if got == "raised":
            detail = f": {outcome.get('exc_type')}: {(outcome.get('message') or '')[:300]}"
        elif got == "warned":
            detail = ": " + "; ".join(
                f"{w.get('category')}: {w.get('message', '')[:200]}" for w in outcome.get("warnings", [])[:3]
            )
        elif got in ("timeout", "crashed", "wrong"):
            detail = f": {outcome.get('reason') or ''}"
        return False, f"expected {want}, got {got}{detail}"
    pattern = expect.get("match")
    if want == "raised":
        names = outcome.get("exc_names") or [outcome.get("exc_type")]
        if expect.get("exc_type") and expect["exc_type"] not in names:
            return False, f"expected {expect['exc_type']}, got {outcome.get('exc_type')}"
        if pattern and not re.search(pattern, outcome.get("message") or "", re.DOTALL):
            return False, f"message does not match /{pattern}/: {(outcome.get('message') or '')[:300]}"
        return True, f"raised {outcome.get('exc_type')} as expected"
    if want == "warned":
        for w in outcome.get("warnings", []):
            names = w.get("names") or [w.get("category")]
            if expect.get("warning") and expect["warning"] not in names:
                continue
            if pattern and not re.search(pattern, w.get("message") or "", re.DOTALL):
                continue
            return True, f"warned {w.get('category')} as expected"
        return False, f"no {expect.get('warning') or 'warning'} matching /{pattern or ''}/"
    return True, f"{got} as expected"


def verdict(broken: dict, fixed: dict) -> tuple[str, str]:
    """An entry's status from its two outcomes: pass, fail or skipped (never skipped as passed)."""
    failed = [(part, o) for part, o in (("broken", broken), ("fixed", fixed)) if o.get("expected") is False]
    if failed:
        return "fail", "; ".join(f"{part}: {o.get('reason')}" for part, o in failed)
    if broken.get("expected") is None:
        return "skipped", broken.get("reason") or "skipped"
    return "pass", "broken and fixed behaved as declared"
