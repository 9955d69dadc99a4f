"""README.md documents every setting of `Settings`, with its variable and default, and nothing else."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from app.config import Settings

from .conftest import ROOT

DOC = ROOT / "README.md"  # the settings table
COMPOSE_DOC = ROOT / "docs" / "configuration.md"  # compose variables, worker command
START, END = "<!-- settings-table:start", "<!-- settings-table:end -->"
ROW = re.compile(r"^\| `(?P<var>[A-Z0-9_]+)` \| (?P<default>.*?) \| (?P<meaning>.*) \|$")


def env_var(name: str) -> str:
    return f"{Settings.model_config['env_prefix']}{name}".upper()


def documented() -> dict[str, dict]:
    """{variable: {"default": text as written in the environment, "meaning": ...}} from the generated table."""
    text = DOC.read_text()
    assert START in text and END in text, f"{DOC} has lost its settings-table markers"
    block = text[text.index(START) : text.index(END)]
    rows = {}
    for line in block.splitlines():
        if m := ROW.match(line):
            assert m["var"] not in rows, f"{m['var']} is documented twice"
            default = m["default"]
            default = "" if default == "*(empty)*" else default.strip("`")
            rows[m["var"]] = {"default": default, "meaning": m["meaning"].replace("\\|", "|")}
    return rows


def test_every_setting_is_documented_with_its_variable_default_and_meaning():
    rows = documented()
    for name, field in Settings.model_fields.items():
        var = env_var(name)
        assert var in rows, f"{var} ({name}) is missing from {DOC.name}: run scripts/settings-table --write"
        assert rows[var]["meaning"] == field.description, f"{var}: the meaning in {DOC.name} is stale"
        assert field.description, f"Settings.{name} has no description"


def test_the_table_has_no_stale_rows():
    known = {env_var(name) for name in Settings.model_fields}
    stale = sorted(set(documented()) - known)
    assert not stale, f"{DOC.name} documents settings that no longer exist: {stale}"


def test_documented_defaults_are_the_real_defaults(monkeypatch):
    """Setting every variable to its documented default changes nothing."""
    for key in list(os.environ):
        if key.startswith("PITFALLS_"):
            monkeypatch.delenv(key)
    defaults = Settings().model_dump()
    for var, row in documented().items():
        monkeypatch.setenv(var, row["default"])
    assert Settings().model_dump() == defaults


def test_generator_check_passes():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "settings-table"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _compose_variables() -> set[str]:
    return set(re.findall(r"\$\{([A-Z0-9_]+)", (ROOT / "docker-compose.yml").read_text()))


@pytest.mark.parametrize("var", sorted(_compose_variables()))
def test_compose_variables_are_documented(var):
    assert f"`{var}`" in COMPOSE_DOC.read_text() + DOC.read_text(), (
        f"docker-compose.yml reads ${{{var}}}; document it"
    )


def test_env_example_names_only_real_variables():
    """Every variable in .env.example is a setting or a compose variable (catches typos like PITFALS_)."""
    known = {env_var(name) for name in Settings.model_fields} | _compose_variables() | {"COMPOSE_PROFILES"}
    names = re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), flags=re.MULTILINE)
    assert names, ".env.example names no variables"
    unknown = sorted(set(names) - known)
    assert not unknown, f".env.example names unknown variables: {unknown}"


def test_env_example_shows_true_defaults():
    """`# PITFALLS_X=value` lines in .env.example show the setting's real default."""
    rows = documented()
    shown = re.findall(
        r"^# (PITFALLS_[A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text(), flags=re.MULTILINE
    )
    assert shown
    for var, value in shown:
        if var in rows:
            assert value == rows[var]["default"], (
                f".env.example shows {var}={value}, the default is {rows[var]['default']}"
            )
