"""Turn entry text and run outcomes into safe HTML pieces: Markdown, highlighted code, diffs, marks.

Everything that returns `Markup` escapes its input first (markdown-it with `html=False`, Pygments
escapes code), so templates never see raw user or snippet text marked safe.
"""

from __future__ import annotations

import difflib
import re
from datetime import UTC, datetime
from functools import lru_cache

from markdown_it import MarkdownIt
from markupsafe import Markup, escape
from pygments import highlight as _pygments
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from ..normalize import WORD, normalize

_FORMATTER = HtmlFormatter(nowrap=True)


def _highlight_fence(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    return f'<pre class="hl"><code>{_pygments(code, lexer, _FORMATTER)}</code></pre>'


# html=False: raw HTML in content is shown as text, never passed through (issue 4: escape everything)
_MD = MarkdownIt("commonmark", {"html": False, "highlight": _highlight_fence}).enable("table")


@lru_cache(maxsize=512)
def markdown(text: str) -> Markup:
    """Render an entry's Markdown (summary, cause, fix) with highlighted fenced code."""
    return Markup(_MD.render(text or ""))


@lru_cache(maxsize=512)
def markdown_inline(text: str) -> Markup:
    """Render one paragraph of Markdown without the surrounding <p> (lists of entries)."""
    return Markup(_MD.renderInline(text or ""))


def code_lines(code: str) -> list[Markup]:
    """Pygments-highlighted Python, one safe HTML string per source line (spans never cross lines)."""
    code = (code or "").strip("\n")
    html = _pygments(code, PythonLexer(), _FORMATTER) if code else ""
    lines = html.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [Markup(line) for line in lines]


MARK_SHARE = 0.6  # mark changed lines only while most lines are shared


def _code_only(line: str) -> str:
    """A line as compared: comments and spacing differences are not changes."""
    return re.sub(r"\s+#.*$|^\s*#.*$", "", line).strip()


def diff_snippets(broken: str, fixed: str) -> tuple[list[tuple[Markup, bool]], list[tuple[Markup, bool]]]:
    """Both snippets highlighted, each line flagged when it differs from the other snippet."""
    a = [_code_only(x) for x in (broken or "").strip("\n").split("\n")]
    b = [_code_only(x) for x in (fixed or "").strip("\n").split("\n")] if fixed else []
    changed_a: set[int] = set()
    changed_b: set[int] = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            changed_a.update(i for i in range(i1, i2) if a[i])
            changed_b.update(j for j in range(j1, j2) if b[j])
    if len(changed_a) > MARK_SHARE * len(a) or len(changed_b) > MARK_SHARE * len(b):
        changed_a, changed_b = set(), set()  # two different programs: a mark on every line says nothing
    hl_a, hl_b = code_lines(broken), code_lines(fixed) if fixed else []
    return (
        [(line, i in changed_a) for i, line in enumerate(hl_a)],
        [(line, i in changed_b) for i, line in enumerate(hl_b)],
    )


_SEGMENTS = re.compile(r"([A-Za-z0-9_]+)")


def mark_shared(signature: str, line: str) -> Markup:
    """The signature with the words it shares with the pasted line wrapped in <mark>.

    The paste goes through the same normaliser as search, so a number or path the matcher set
    aside is not marked as if it had matched.
    """
    shared = set(WORD.findall(normalize(line).text.lower())) if line else set()
    parts = _SEGMENTS.split(signature)  # [sep, word, sep, word, ..., sep]
    hit = [i % 2 == 1 and p.lower() in shared and not p.isdigit() for i, p in enumerate(parts)]
    out: list[str] = []
    open_mark = False
    for i, part in enumerate(parts):
        if i % 2 == 0:  # a separator: stays inside a mark only between two marked words
            inside = open_mark and i + 1 < len(parts) and hit[i + 1]
            if open_mark and not inside:
                out.append("</mark>")
                open_mark = False
            out.append(str(escape(part)))
        else:
            if hit[i] and not open_mark:
                out.append("<mark>")
                open_mark = True
            elif not hit[i] and open_mark:
                out.append("</mark>")
                open_mark = False
            out.append(str(escape(part)))
    if open_mark:
        out.append("</mark>")
    return Markup("".join(out))


_PLURAL = {"address": "addresses", "GPU arch": "GPU archs"}
_DISPLAY = {"url": "URL"}


def ignored_summary(ignored: dict[str, int]) -> str:
    """{"path": 2, "number": 3, "shape": 1} -> "2 paths, 3 numbers, a shape"."""
    parts = []
    for label, n in sorted(ignored.items(), key=lambda kv: (-kv[1], kv[0])):
        name = _DISPLAY.get(label, label)
        if n == 1:
            article = "an" if name[0].lower() in "aeio" else "a"
            parts.append(f"{article} {name}")
        else:
            parts.append(f"{n} {_PLURAL.get(name, name + 's')}")
    return ", ".join(parts)


def duration(ms: float | None) -> str:
    """412 -> "412 ms"; 1530 -> "1.5 s"."""
    if ms is None:
        return ""
    ms = float(ms)
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def when(value: datetime | str | None) -> str:
    """A stored time (aware, naive-UTC or ISO text) as "2025-11-22 11:03 UTC"."""
    if not value:
        return ""
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return text  # not a time: shown as it is
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def iso(value: datetime | str | None) -> str:
    """Machine-readable time for <time datetime=...>."""
    if not value:
        return ""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()
