"""Fixtures for the deployment tests: the repository's Docker files, parsed, and a few helpers."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tool(name: str) -> str | None:
    """A command-line tool from PATH or from this interpreter's environment."""
    found = shutil.which(name)
    if found:
        return found
    candidate = BIN / name
    return str(candidate) if candidate.exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stage:
    """One `FROM ... AS name` stage of the Dockerfile: its instructions, continuation lines joined."""

    def __init__(self, name: str, base: str):
        self.name, self.base = name, base
        self.instructions: list[tuple[str, str]] = []

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def cmd(self) -> list[str]:
        """The stage's last CMD, in exec form."""
        return json.loads(self.all("CMD")[-1])

    def copies(self) -> list[tuple[list[str], str]]:
        """(sources, destination) of each COPY from the build context (not `--from=` another stage)."""
        out = []
        for args in self.all("COPY"):
            words = [
                w for w in shlex.split(args) if not w.startswith("--chown") and not w.startswith("--chmod")
            ]
            if any(w.startswith("--from") for w in words):
                continue
            out.append((words[:-1], words[-1]))
        return out

    def env(self) -> dict[str, str]:
        out = {}
        for args in self.all("ENV"):
            for word in shlex.split(args):
                key, _, value = word.partition("=")
                out[key] = value
        return out


def parse_dockerfile(path: Path) -> dict[str, Stage]:
    text = re.sub(r"\\\n", " ", path.read_text())
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            current = stages[name] = Stage(name, words[0])
        elif current is not None:
            current.instructions.append((keyword, args.strip()))
    return stages


@pytest.fixture(scope="session")
def dockerfile() -> dict[str, Stage]:
    return parse_dockerfile(ROOT / "Dockerfile")


@pytest.fixture(scope="session")
def compose() -> dict:
    """docker-compose.yml as compose sees it (YAML merge keys resolved by the loader)."""
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())
