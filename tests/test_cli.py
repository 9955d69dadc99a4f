"""The CLI as users run it: real subprocesses, a real SQLite file, hostile stdin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

TRACEBACK = b"""Traceback (most recent call last):
  File "/home/u/job/train.py", line 41, in <module>
    loss.backward()
RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory, seed_db):
    db = seed_db(tmp_path_factory.mktemp("cli") / "cli.db")  # content/ already synced (tests/conftest.py)
    return {
        **os.environ,
        "PITFALLS_DATABASE_URL": f"sqlite:///{db}",
        "PITFALLS_CONTENT_DIR": str(ROOT / "content"),
    }


def pitfalls(env, *args, stdin: bytes = b""):
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
    )


def test_cli_explain_prints_entry_fix_and_link(env):
    r = pitfalls(env, "explain", stdin=TRACEBACK)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "backward" in out.lower() and "Fix" in out and "/e/backward-graph-second-time" in out


def test_cli_explain_says_plainly_when_nothing_matches(env):
    r = pitfalls(env, "explain", stdin=b"KeyError: 'learning_rate'\n")
    assert r.returncode == 1
    assert "No entry matches" in r.stdout.decode()


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"   \n\t",
        b"\x00\x00\x00",
        b"\xff\xfe\xfa RuntimeError: \xc3(",
        b'" NEAR( OR * -',
        b"x" * 1_500_000,
    ],
)
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
    cases.write_text(
        "\n".join(
            json.dumps(c)
            for c in [
                {"id": "right", "text": TRACEBACK.decode(), "ok": ["backward-graph-second-time"]},
                {
                    "id": "abstain",
                    "text": "KeyError: 'learning_rate'",
                    "ok": [],
                    "wanted": "a config key entry",
                },
                {"id": "mislabelled", "text": TRACEBACK.decode(), "ok": ["view-non-contiguous"]},
            ]
        )
        + "\n"
    )
    r = pitfalls(env, "eval", str(cases), "--json")
    assert r.returncode == 0, r.stderr.decode()
    report = json.loads(r.stdout)
    fig = report["figures"]
    assert fig["cases"] == 3 and fig["covered"] == 2
    assert fig["top1_confident_right"] == 0.5 and fig["abstain_uncovered"] == 1.0
    assert abs(fig["wrong_confident"] - 1 / 3) < 1e-9
    assert [m["id"] for m in report["misses"]] == ["mislabelled"]
    assert report["misses"][0]["got"][0] == "backward-graph-second-time"


def test_cli_eval_saves_verdicts_and_shows_what_changed(env, tmp_path):
    import json

    cases = tmp_path / "cases.jsonl"

    def write(label):
        cases.write_text(json.dumps({"id": "c1", "text": TRACEBACK.decode(), "ok": [label]}) + "\n")

    write("backward-graph-second-time")
    saved = tmp_path / "before.json"
    assert pitfalls(env, "eval", str(cases), "--save", str(saved)).returncode == 0
    assert json.loads(saved.read_text()) == {"c1": "right"}
    write("view-non-contiguous")  # now the confident answer is wrong for this case
    r = pitfalls(env, "eval", str(cases), "--against", str(saved), "--json")
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["changed"] == {"better": [], "worse": [["c1", "right", "wrong-confident"]]}
    r = pitfalls(env, "eval", str(cases), "--against", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and b"missing.json" in r.stderr


def test_cli_eval_names_the_bad_line(env, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x", "ok": []}\n{"id": "b", "text": 5}\n')
    r = pitfalls(env, "eval", str(bad))
    assert r.returncode == 2
    assert f"{bad}:2: field text" in r.stderr.decode()


def test_cli_explain_passes_the_output_through_then_explains(env):
    noise = b"epoch 1 loss 0.3\nepoch 2 loss 0.2\n"
    r = pitfalls(env, "explain", stdin=noise + TRACEBACK)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert out.startswith("epoch 1 loss 0.3\nepoch 2 loss 0.2\nTraceback")  # the program's own output first
    assert out.index("RuntimeError: Trying to backward") < out.index("/e/backward-graph-second-time")


def test_cli_outside_the_repository_says_what_to_do_and_leaves_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITFALLS_")}
    r = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "explain"],
        input=TRACEBACK,
        capture_output=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 2
    assert "--server" in r.stderr.decode()
    assert list(tmp_path.iterdir()) == []  # no pitfalls.db left behind


@pytest.fixture(scope="module")
def team_server(tmp_path_factory, seed_db):
    from app.config import Settings
    from app.main import create_app
    from tests.web.support import LiveServer, free_port

    db = seed_db(tmp_path_factory.mktemp("team") / "team.db")  # content/ already synced
    settings = Settings(database_url=f"sqlite:///{db}", content_dir=ROOT / "content", local_workers=0)
    with LiveServer(create_app(settings), free_port()) as server:
        yield server.url


def test_cli_search_and_explain_against_a_team_server_from_any_folder(team_server, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PITFALLS_")}, "PYTHONPATH": str(ROOT)}
    run = lambda *args, **kw: subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", *args],
        capture_output=True,
        env=kw.get("env", env),
        cwd=tmp_path,
        input=kw.get("stdin", b""),
        timeout=120,
    )
    r = run("explain", "--server", team_server, stdin=TRACEBACK)
    assert r.returncode == 0, r.stderr.decode()
    assert f"{team_server}/e/backward-graph-second-time" in r.stdout.decode() and "Fix" in r.stdout.decode()
    r = run(
        "search",
        "--json",
        "RuntimeError: view size is not compatible with input tensor's size and stride",
        env={**env, "PITFALLS_SERVER": team_server},
    )
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["results"][0]["slug"] == "view-non-contiguous"
    assert list(tmp_path.iterdir()) == []
    r = run("search", "x", "--server", "http://127.0.0.1:9")  # nobody there
    assert r.returncode == 2 and "cannot reach" in r.stderr.decode()


def test_cli_verify_records_outcomes_for_the_pages(env):
    import sqlite3

    r = pitfalls(env, "verify", "--slug", "view-non-contiguous")
    assert r.returncode == 0, r.stderr.decode()
    db = env["PITFALLS_DATABASE_URL"].removeprefix("sqlite:///")
    rows = (
        sqlite3.connect(db)
        .execute("SELECT part, expected FROM result WHERE entry_slug = 'view-non-contiguous' ORDER BY part")
        .fetchall()
    )
    assert rows == [("broken", 1), ("fixed", 1)]


def test_cli_verify_names_each_failed_entry_after_its_summary(env, tmp_path):
    """The table lists failures first, but a CI log keeps only its tail: the summary line is followed by
    each failed entry and why, so a red run says which entry broke."""
    content = tmp_path / "content" / "loss"
    content.mkdir(parents=True)
    (content / "test-right.toml").write_text(_entry("test right", "print('ok')"))
    # (a message can hold what rich reads as markup: gloo's `[/__w/pytorch/.../pair.cc:537]`)
    (content / "test-wrong.toml").write_text(
        _entry("test wrong", "raise ValueError('[/gloo/pair.cc:537] broken')")
    )
    r = pitfalls({**env, "PITFALLS_CONTENT_DIR": str(tmp_path / "content")}, "verify", "--no-store")
    assert r.returncode == 1, r.stderr.decode()
    tail = r.stdout.decode().rsplit("1 passed, 1 failed, 0 skipped", 1)[1]
    assert "loss/test-wrong" in tail and "ValueError" in tail and "[/gloo/pair.cc:537]" in tail, tail
    assert "test-right" not in tail, tail
    # and reproduce shows such a message as it was printed
    r = pitfalls({**env, "PITFALLS_CONTENT_DIR": str(tmp_path / "content")}, "reproduce", "test-wrong")
    assert "[/gloo/pair.cc:537] broken" in r.stdout.decode(), r.stderr.decode()


def _entry(title: str, fixed: str) -> str:
    """A minimal valid entry whose broken snippet passes and whose fixed snippet is `fixed`."""
    return f"""title = "{title}"
summary = "A test entry."
tags = ["test"]
torch = ">=2.0"
sources = ["https://pytorch.org/docs/stable/multiprocessing.html"]
signatures = ["RuntimeError: {title}"]
cause = "A test entry for verify."
fix = "A test entry for verify."

[broken]
code = '''
raise RuntimeError("{title}")
'''
expect = {{ outcome = "raised", exc_type = "RuntimeError", match = "{title}" }}

[fixed]
code = '''{fixed}'''
expect = {{ outcome = "ok" }}
"""


def _spawned(switch: Path, body: str) -> str:
    """A fixed snippet whose one spawned process reads `switch` (outside /tmp: the sandbox has its
    own), then runs `body`."""
    return f"""
import os
import torch.multiprocessing as mp

def worker(rank):
    state = open({str(switch)!r}).read()
{body}

if __name__ == "__main__":
    mp.start_processes(worker, nprocs=1, start_method="fork")  # spawn: same errors, 3 s slower
"""


def test_verify_runs_a_part_that_misbehaved_once_more_and_fails_it_the_second_time(tmp_path):
    """A multi-process snippet can die in a teardown race (gloo aborting while its peer closes): a part
    that did not behave as declared gets one second try, reported as such. A snippet that dies by a
    signal twice, or is wrong every time, still fails, and is not run more than twice."""
    from app.cli_runs import run_entry
    from app.content import load_dir
    from app.sandbox.pool import Pool

    content = tmp_path / "content" / "parallel"
    content.mkdir(parents=True)
    switches = Path(tempfile.mkdtemp(prefix=".verify-test-", dir=ROOT))
    switches.chmod(0o755)  # the sandbox runs snippets as another user
    bodies = {
        "flaky": "    if state == 'abort':\n        os.abort()\n    print('second run ok', flush=True)",
        "always": "    os.abort()",
        "wrong": "    raise ValueError('not a signal')",
    }
    try:
        for name, body in bodies.items():
            (switches / name).write_text("abort")
            fixed = _spawned(switches / name, body)
            (content / f"test-{name}.toml").write_text(_entry(f"test {name}", fixed))
        runs: list[str] = []

        class Flipping:
            """The real pool; after the flaky snippet's first run its race is over (its switch flips)."""

            def __init__(self, pool: Pool) -> None:
                self.pool = pool

            def run(self, job):
                out = self.pool.run(job)
                runs.append(next((n for n in bodies if f"/{n}'" in job["code"]), "broken"))
                if runs[-1] == "flaky":
                    (switches / "flaky").write_text("pass")
                return out

        with Pool(size=1, spare=0) as pool:
            rows = {e.slug: run_entry(Flipping(pool), e) for e in load_dir(tmp_path / "content")}
    finally:
        shutil.rmtree(switches)
    assert sorted(runs) == sorted(["broken"] * 3 + ["flaky", "flaky", "always", "always", "wrong", "wrong"])
    flaky = rows["test-flaky"]
    assert flaky["status"] == "pass" and "SIGABRT" in flaky["retried"]["fixed"], flaky
    assert flaky["fixed"]["stdout"].strip() == "second run ok"
    always = rows["test-always"]
    assert always["status"] == "fail" and "SIGABRT" in always["retried"]["fixed"], always
    wrong = rows["test-wrong"]
    assert wrong["status"] == "fail" and "expected ok, got raised" in wrong["retried"]["fixed"], wrong
