"""The CLI as users run it: real subprocesses, a real SQLite file, hostile stdin."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

TRACEBACK = b"""Traceback (most recent call last):
  File "/home/u/job/train.py", line 41, in <module>
    loss.backward()
RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "cli.db"
    return {**os.environ, "PITFALLS_DATABASE_URL": f"sqlite:///{db}", "PITFALLS_CONTENT_DIR": str(ROOT / "content")}


def pitfalls(env, *args, stdin: bytes = b""):
    return subprocess.run([sys.executable, "-c", "from app.cli import main; main()", *args], input=stdin,
                          capture_output=True, env=env, timeout=120)


def test_cli_explain_prints_entry_fix_and_link(env):
    r = pitfalls(env, "explain", stdin=TRACEBACK)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "backward" in out.lower() and "Fix" in out and "/e/backward-graph-second-time" in out


def test_cli_explain_says_plainly_when_nothing_matches(env):
    r = pitfalls(env, "explain", stdin=b"KeyError: 'learning_rate'\n")
    assert r.returncode == 1
    assert "No entry matches" in r.stdout.decode()


@pytest.mark.parametrize("stdin", [b"", b"   \n\t", b"\x00\x00\x00", b"\xff\xfe\xfa RuntimeError: \xc3(",
                                   b'" NEAR( OR * -', b"x" * 1_500_000])
def test_cli_explain_hostile_stdin_gets_clear_answer(env, stdin):
    r = pitfalls(env, "explain", stdin=stdin)
    assert r.returncode in (0, 1, 2), r.stderr.decode()[-500:]
    assert b"Traceback" not in r.stderr  # a message, never a crash
    assert (r.stdout + r.stderr).strip()


def test_cli_search_json(env):
    r = pitfalls(env, "search", "--json", "IndexError: Target 12 is out of bounds.")
    assert r.returncode == 0
    assert b'"cross-entropy-target-out-of-range"' in r.stdout


def test_cli_search_reads_stdin_dash(env):
    r = pitfalls(env, "search", "-", stdin=TRACEBACK)
    assert r.returncode == 0 and b"backward-graph-second-time" in r.stdout


def test_cli_coverage_passes_on_real_content(env):
    r = pitfalls(env, "coverage")
    assert r.returncode == 0, r.stdout.decode()[-2000:]
    assert b"seed lines covered" in r.stdout


def test_cli_eval_scores_cases_and_lists_misses(env, tmp_path):
    import json

    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in [
        {"id": "right", "text": TRACEBACK.decode(), "ok": ["backward-graph-second-time"]},
        {"id": "abstain", "text": "KeyError: 'learning_rate'", "ok": [], "wanted": "a config key entry"},
        {"id": "mislabelled", "text": TRACEBACK.decode(), "ok": ["view-non-contiguous"]},
    ]) + "\n")
    r = pitfalls(env, "eval", str(cases), "--json")
    assert r.returncode == 0, r.stderr.decode()
    report = json.loads(r.stdout)
    fig = report["figures"]
    assert fig["cases"] == 3 and fig["covered"] == 2
    assert fig["top1_confident_right"] == 0.5 and fig["abstain_uncovered"] == 1.0
    assert abs(fig["wrong_confident"] - 1 / 3) < 1e-9
    assert [m["id"] for m in report["misses"]] == ["mislabelled"]
    assert report["misses"][0]["got"][0] == "backward-graph-second-time"


def test_cli_eval_names_the_bad_line(env, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x", "ok": []}\n{"id": "b", "text": 5}\n')
    r = pitfalls(env, "eval", str(bad))
    assert r.returncode == 2
    assert f"{bad}:2: field text" in r.stderr.decode()
