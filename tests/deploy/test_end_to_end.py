"""End to end outside Docker, running exactly the commands the containers run.

- the web service: the `command` of `web` in docker-compose.yml, with the compose file's environment
  (host 127.0.0.1 and a free port instead of 0.0.0.0:8000, a temporary database and content folder,
  `PITFALLS_LEASE_S=3` so that expired leases come round quickly), and with torch made unimportable,
  as in the web image;
- workers: the worker image's CMD (`sh -c "exec python -m app.sandbox.agent ..."`) in a folder that
  holds only the files the worker image copies, with the image's and compose's environment; and
  `pitfalls worker --server URL --token T`, as a team runs one on another GPU box.

Then: an entry is reproduced over HTTP; a wrong token is refused; a worker that leased a run and
died (a fake one that never heartbeats, and a real one killed mid-run) loses the run to another.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import BACKENDS

from .conftest import BIN, ROOT, free_port, tool

pytestmark = pytest.mark.slow

TOKEN = "secret"
ENTRY = "view-non-contiguous"
SLOW_ENTRY = "deploy-test-slow-run"
CUDA_ENTRY = "cuda-input-cpu-model"
LEASE_S = 5

SLOW_ENTRY_TOML = '''
title = "Deployment test: a run that takes a few seconds"
summary = "Not a pitfall: tests/deploy stops a worker in the middle of this run."
cause = "A fixture of the deployment tests."
fix = "Nothing to fix; a fixture of the deployment tests."
signatures = ["DeployTestError: the slow run finished"]

[broken]
code = """
import time
time.sleep(4)
raise ValueError("the slow run finished")
"""
expect = { outcome = "raised", exc_type = "ValueError", match = "slow run finished" }

[fixed]
code = """
import time
time.sleep(0.5)
print("done")
"""
expect = { outcome = "ok" }
'''


# --- processes ------------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class Proc:
    def __init__(self, name: str, cmd: list[str], env: dict, cwd: Path, log: Path):
        self.name, self.cmd, self.log = name, cmd, log
        self.fh = open(log, "wb")  # noqa: SIM115  (closed in stop())
        self.popen = subprocess.Popen(
            cmd,
            env=env,
            cwd=cwd,
            stdout=self.fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = self.popen.pid

    def output(self) -> str:
        self.fh.flush()
        return self.log.read_text(errors="replace")

    def kill_all(self) -> None:
        """SIGKILL the process and everything it started, as when its container is killed."""
        for pid in [self.pid, *descendants(self.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.popen.wait(10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            family = descendants(self.pid)
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                pass
            for pid in [self.pid, *family]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.popen.wait(10)
        self.fh.close()


def interpolate(value: str, given: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}`, from `given` only."""

    def one(m: re.Match) -> str:
        name, op, arg = m["name"], m["op"], m["arg"]
        if given.get(name):
            return given[name]
        if op == ":?":
            raise AssertionError(f"compose would refuse to start: {arg}")
        return arg or ""

    return re.sub(r"\$\{(?P<name>\w+)(?:(?P<op>:[-?])(?P<arg>[^}]*))?\}", one, str(value))


# --- the deployment -------------------------------------------------------------------------------


class Deployment:
    def __init__(self, root: Path, compose: dict, dockerfile):
        self.root, self.compose, self.dockerfile = root, compose, dockerfile
        self.procs: list[Proc] = []
        self.database_url: str | None = None  # None: a SQLite file in `root/data`
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.url, timeout=30)
        self.base_env = {k: v for k, v in os.environ.items() if not k.startswith("PITFALLS_")}
        self.base_env["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # `python`, `pitfalls`
        self._make_content()
        self._make_worker_tree()
        self._make_notorch()

    # files
    def _make_content(self) -> None:
        self.content = self.root / "content"
        (self.content / "mismatch").mkdir(parents=True)
        for slug in (ENTRY, CUDA_ENTRY):
            shutil.copy(ROOT / "content" / "mismatch" / f"{slug}.toml", self.content / "mismatch")
        (self.content / "mismatch" / f"{SLOW_ENTRY}.toml").write_text(SLOW_ENTRY_TOML)

    def _make_worker_tree(self) -> None:
        """The worker image's /app: only what its COPY lines bring in (stdlib + torch must suffice)."""
        self.worker_app = self.root / "worker-image" / "app"
        stage = self.dockerfile["worker"]
        workdir = stage.all("WORKDIR")[-1]
        for sources, dest in stage.copies():
            if not dest.startswith(workdir) and dest.startswith("/"):
                continue  # e.g. the pip requirements copied to /tmp
            for src in sources:
                target = self.worker_app / dest.removeprefix(workdir).lstrip("/")
                if (ROOT / src).is_dir():
                    shutil.copytree(ROOT / src, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(ROOT / src, target)
        assert (self.worker_app / "app" / "sandbox" / "agent.py").exists()
        assert not (self.worker_app / "app" / "config.py").exists()
        # This interpreter has the whole app installed in editable mode, whose import hook would find
        # `app.config` & co. anyway; the image has no such hook. Take it out of the worker's processes.
        self.worker_guard = self.root / "worker-guard"
        self.worker_guard.mkdir()
        (self.worker_guard / "sitecustomize.py").write_text(
            "import sys\n"
            "def _editable(hook):\n"
            "    return '__editable__' in (getattr(hook, '__module__', '') or '')\n"
            "sys.meta_path[:] = [f for f in sys.meta_path if not _editable(f)]\n"
            "sys.path_hooks[:] = [h for h in sys.path_hooks if not _editable(h)]\n"
            "sys.path_importer_cache.clear()\n"
        )

    def _make_notorch(self) -> None:
        """A `torch` that cannot be imported: the web image has none."""
        self.notorch = self.root / "notorch"
        (self.notorch / "torch").mkdir(parents=True)
        (self.notorch / "torch" / "__init__.py").write_text(
            'raise ImportError("torch is not installed in the web image")\n'
        )

    # services
    def start(self, name: str, cmd: list[str], env: dict, cwd: Path, token: str | None = None) -> Proc:
        proc = Proc(name, cmd, env, cwd, self.root / f"{name}-{len(self.procs)}.log")
        proc.token = token
        self.procs.append(proc)
        return proc

    def start_web(self) -> Proc:
        web = self.compose["services"]["web"]
        cmd = list(web["command"])
        assert cmd[:2] == ["pitfalls", "serve"]
        cmd[cmd.index("--host") + 1] = "127.0.0.1"
        cmd[cmd.index("--port") + 1] = str(self.port)
        cmd[0] = tool("pitfalls")
        env = {
            **self.base_env,
            **{k: interpolate(v, {"PITFALLS_WORKER_TOKEN": TOKEN}) for k, v in web["environment"].items()},
        }
        env.update(
            PITFALLS_DATABASE_URL=self.database_url or f"sqlite:///{self.root / 'data' / 'pitfalls.db'}",
            PITFALLS_CONTENT_DIR=str(self.content),
            PITFALLS_LEASE_S=str(LEASE_S),
            PITFALLS_RESULT_CACHE="false",  # every reproduce must reach a worker
            PYTHONPATH=os.pathsep.join(filter(None, [str(self.notorch), os.environ.get("PYTHONPATH")])),
        )
        assert env["PITFALLS_LOCAL_WORKERS"] == "0" and env["PITFALLS_WORKER_TOKEN"] == TOKEN
        proc = self.start("web", cmd, env, self.root)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.popen.poll() is None, f"the web service exited:\n{proc.output()}"
            try:
                if self.http.get("/healthz").status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"the web service did not become healthy:\n{proc.output()}")

    def start_image_worker(self, token: str = TOKEN, spare: int = 1) -> Proc:
        """The worker image's CMD with the image's and compose's environment.

        `spare` is set as a team would in .env (PITFALLS_WORKER_SPARE): fewer warm children start
        faster on a small CI machine.
        """
        stage = self.dockerfile["worker"]
        image_env = stage.env()
        given = {"PITFALLS_WORKER_TOKEN": token, "PITFALLS_WORKER_SPARE": str(spare)}
        compose_env = {
            k: interpolate(v, given) for k, v in self.compose["services"]["worker"]["environment"].items()
        }
        home = self.root / "worker-home"
        env = {
            **self.base_env,
            **image_env,
            **compose_env,
            "PITFALLS_SERVER": self.url,  # http://web:8000 in compose
            "PYTHONPATH": os.pathsep.join([str(self.worker_app), str(self.worker_guard)]),
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
        }
        cmd = stage.cmd()
        assert cmd[:2] == ["sh", "-c"]
        return self.start("worker-image", cmd, env, self.worker_app, token=token)

    def start_cli_worker(self, token: str = TOKEN, spare: int = 1) -> Proc:
        """`pitfalls worker --server URL --token T` (a team's GPU box)."""
        cmd = [tool("pitfalls"), "worker", "--server", self.url, "--token", token, "--spare", str(spare)]
        return self.start("worker-cli", cmd, self.base_env, self.root, token=token)

    # HTTP
    def reproduce(self, slug: str) -> int:
        resp = self.http.post(f"/api/entries/{slug}/reproduce")
        assert resp.status_code == 202, resp.text
        assert resp.json()["state"] == "queued"
        return resp.json()["id"]

    def run(self, run_id: int) -> dict:
        resp = self.http.get(f"/api/runs/{run_id}")
        assert resp.status_code == 200, resp.text
        return resp.json()

    def wait_run(self, run_id: int, state: str = "done", timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run["state"] == state:
                return run
            time.sleep(0.1)
        raise AssertionError(f"run {run_id} is still {run['state']} after {timeout}s:\n{self.logs()}")

    def worker_call(self, path: str, body: dict, token: str | None = TOKEN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return self.http.post(f"/api/worker{path}", json=body, headers=headers)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name} (pid {p.pid}, {p.cmd[:3]}) ---\n{p.output()[-3000:]}" for p in self.procs
        )

    def workers(self) -> list[Proc]:
        return [p for p in self.procs if p.name.startswith("worker") and p.popen.poll() is None]

    def only_worker(self) -> Proc:
        """The one real worker that is up (started if there is none), so that it gets the next run."""
        live = [p for p in self.workers() if p.token == TOKEN]
        for proc in live[1:]:
            proc.stop()
        return live[0] if live else self.start_cli_worker()

    def stop_workers(self) -> None:
        for proc in self.workers():
            proc.stop()

    def stop(self) -> None:
        self.http.close()
        for proc in reversed(self.procs):
            proc.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def deployment(request, tmp_path_factory, compose, dockerfile):
    """The deployment on SQLite (as compose runs it) and on PostgreSQL (the compose `postgres` profile)."""
    if not (ROOT / "app" / "sandbox" / "agent.py").exists():
        pytest.skip("app/sandbox/agent.py (the worker) is not there yet")
    if not tool("pitfalls"):
        pytest.skip("the `pitfalls` command is not installed (pip install -e .)")
    pytest.importorskip("torch", reason="workers need torch")
    dep = Deployment(tmp_path_factory.mktemp("deploy"), compose, dockerfile)
    if request.param == "postgresql":
        dep.database_url = request.getfixturevalue("pg_server").database()
    try:
        dep.web = dep.start_web()
        yield dep
    finally:
        dep.stop()


def expected_outcomes(run: dict, broken_exc: str) -> None:
    broken, fixed = run["results"]["broken"], run["results"]["fixed"]
    assert broken["outcome"] == "raised" and broken["exc_type"] == broken_exc, broken
    assert broken["expected"] is True, broken
    assert fixed["outcome"] == "ok" and fixed["expected"] is True, fixed
    assert broken["torch_version"] and broken["device"]


# --- tests ----------------------------------------------------------------------------------------


def test_web_service_runs_as_in_its_image(deployment):
    """No local workers, no torch, htmx from the image, and migrations + content sync done at start."""
    health = deployment.http.get("/healthz").json()
    assert health["status"] == "ok" and health["entries"] == 3
    assert descendants(deployment.web.pid) == [], (
        "with PITFALLS_LOCAL_WORKERS=0 the web service starts no workers"
    )
    page = deployment.http.get("/")
    assert page.status_code == 200
    assert "/static/vendor/htmx.min.js" in page.text
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", page.text), (
        "a page loads from the internet"
    )
    js = deployment.http.get("/static/vendor/htmx.min.js")
    assert js.status_code == 200 and len(js.content) > 10_000


def test_wrong_token_is_refused(deployment):
    body = {"worker": {"id": "intruder"}, "wait_s": 0}
    for headers in ({"Authorization": "Bearer wrong"}, {}, {"Authorization": f"Basic {TOKEN}"}):
        resp = deployment.http.post("/api/worker/lease", json=body, headers=headers)
        assert resp.status_code == 401, (headers, resp.status_code, resp.text)
    image_worker = deployment.start_image_worker(token="wrong", spare=0)
    cli_worker = deployment.start_cli_worker(token="wrong", spare=0)
    for proc in (image_worker, cli_worker):
        try:
            code = proc.popen.wait(90)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{proc.name} with a wrong token did not exit:\n{proc.output()}") from None
        out = proc.output()
        assert code != 0, out
        assert "refused the token" in out, out
    assert image_worker.popen.returncode == 2
    assert "Traceback" not in image_worker.output()


def test_a_dead_workers_lease_expires_and_another_worker_finishes_the_run(deployment):
    deployment.stop_workers()
    run_id = deployment.reproduce(ENTRY)
    # a worker leases the run by hand, then "dies": it never heartbeats
    fake = {"id": "fake-dead-worker", "device": "cpu", "torch_version": "0", "gpus": 0}
    lease = deployment.worker_call("/lease", {"worker": fake, "wait_s": 5})
    assert lease.status_code == 200, lease.text
    job = lease.json()
    assert job["run_id"] == run_id and job["lease_s"] == LEASE_S and job["snippets"]["broken"]["code"]
    run = deployment.run(run_id)
    assert run["state"] == "running" and run["worker"] == "fake-dead-worker"

    worker = deployment.start_cli_worker()
    run = deployment.wait_run(run_id)
    assert run["worker"] != "fake-dead-worker" and run["worker"].endswith(f"-{worker.pid}")
    # 2 leases: the dead worker's, then this one's. A third is possible on a loaded machine, where
    # a short lease can lapse between heartbeats; the run is then requeued and still finished here.
    assert run["attempts"] >= 2
    expected_outcomes(run, "RuntimeError")
    # the dead worker's lease is gone for good
    assert deployment.worker_call(f"/runs/{run_id}/heartbeat", {"lease": job["lease"]}).status_code == 409
    late = {"lease": job["lease"], "part": "broken", "result": {"outcome": "ok"}}
    assert deployment.worker_call(f"/runs/{run_id}/result", late).status_code == 409
    assert deployment.run(run_id)["results"]["broken"]["outcome"] == "raised"


def test_reproduce_an_entry_end_to_end(deployment):
    worker = deployment.only_worker()
    run_id = deployment.reproduce(ENTRY)
    run = deployment.wait_run(run_id)
    assert run["attempts"] >= 1 and run["worker"].endswith(f"-{worker.pid}")
    expected_outcomes(run, "RuntimeError")
    assert "view size is not compatible" in run["results"]["broken"]["message"]
    entry = deployment.http.get(f"/api/entries/{ENTRY}").json()
    assert entry["latest"]["broken"]["outcome"] == "raised" and entry["latest"]["fixed"]["outcome"] == "ok"
    health = deployment.http.get("/healthz").json()
    assert any(w["id"] == run["worker"] and w["torch_version"] for w in health["workers"])


def test_killing_a_worker_mid_run_requeues_the_run_for_another(deployment):
    first = deployment.only_worker()
    run_id = deployment.reproduce(SLOW_ENTRY)
    run = deployment.wait_run(run_id, state="running", timeout=60)
    assert run["worker"].endswith(f"-{first.pid}")
    first.kill_all()  # the container is killed: agent, pool, fork server, the snippet itself
    run = deployment.run(run_id)
    assert run["state"] == "running" and run["results"] == {}, "the worker died in the middle of the run"

    second = deployment.start_image_worker()
    run = deployment.wait_run(run_id, timeout=90)
    assert run["worker"].endswith(f"-{second.pid}"), run["worker"]
    assert run["attempts"] >= 2  # see the test above: a short lease may lapse once more under load
    expected_outcomes(run, "ValueError")
    assert deployment.http.get("/healthz").json()["queue"] == {"queued": 0, "running": 0}


@pytest.mark.gpu
def test_a_gpu_worker_reproduces_a_cuda_entry(deployment):
    """On a machine with an NVIDIA GPU: the worker image's command runs a CUDA entry on the GPU."""
    import torch

    if not torch.backends.cuda.is_built() or torch.cuda.device_count() == 0:
        pytest.skip("no CUDA GPU on this machine")
    deployment.stop_workers()
    worker = deployment.start_image_worker()
    run_id = deployment.reproduce(CUDA_ENTRY)
    run = deployment.wait_run(run_id, timeout=120)
    assert run["worker"].endswith(f"-{worker.pid}")
    expected_outcomes(run, "RuntimeError")
    for part in ("broken", "fixed"):
        assert run["results"][part]["device"].startswith("NVIDIA"), run["results"][part]
    health = deployment.http.get("/healthz").json()
    assert any(w["id"] == run["worker"] and w["gpus"] >= 1 for w in health["workers"])
