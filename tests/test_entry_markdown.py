"""Every entry's Markdown renders cleanly: no backtick left over outside code spans (an unbalanced
or escaped backtick shows as raw Markdown on the page, as a category list once showed)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from app.web.markup import markdown, markdown_inline

CONTENT = Path(__file__).resolve().parent.parent / "content"
FILES = sorted(CONTENT.glob("*/*.toml"))


def stray_backticks(html: str) -> bool:
    doc = BeautifulSoup(html, "html.parser")
    for code in doc.select("code, pre"):  # (a code span may hold a backtick: ``Assertion `x` failed``)
        code.decompose()
    return "`" in doc.get_text()


@pytest.mark.parametrize("field", ["summary", "cause", "fix"])
def test_entry_markdown_has_no_stray_backticks(field):
    render = markdown_inline if field == "summary" else markdown
    bad = []
    for path in FILES:
        text = tomllib.loads(path.read_text(encoding="utf-8")).get(field)
        if isinstance(text, str) and stray_backticks(str(render(text))):
            bad.append(path.relative_to(CONTENT).as_posix())
    assert bad == []
