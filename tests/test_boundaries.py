"""Import boundaries, checked in fresh interpreters (DESIGN.md principles 1 and 2)."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_web_tier_never_imports_torch():
    mods = _modules_after("import app.main, app.web.pages, app.search, app.runs\napp.main.create_app()")
    assert "torch" not in mods


def test_cli_import_does_not_import_torch():
    assert "torch" not in _modules_after("import app.cli")
