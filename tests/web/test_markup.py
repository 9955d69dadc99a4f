"""The HTML helpers behind the pages: marks, summaries, Markdown, highlighted diffs."""

from __future__ import annotations

import pytest

from app.web import markup


@pytest.mark.parametrize(
    ("ignored", "text"),
    [
        ({"path": 2, "number": 3, "shape": 1}, "3 numbers, 2 paths, a shape"),
        ({"address": 1, "url": 1}, "an address, a URL"),
        ({"address": 2, "traceback frame": 5}, "5 traceback frames, 2 addresses"),
        ({}, ""),
    ],
)
def test_ignored_summary_reads_like_a_sentence(ignored, text):
    assert markup.ignored_summary(ignored) == text


def test_mark_shared_marks_runs_of_shared_words_not_numbers():
    html = markup.mark_shared(
        "IndexError: Target 5 is out of bounds.", "IndexError: Target 11 is out of bounds."
    )
    assert str(html) == "<mark>IndexError: Target</mark> 5 <mark>is out of bounds</mark>."


def test_mark_shared_escapes_the_signature():
    html = str(markup.mark_shared("<script>alert(1)</script> error", "error <script>"))
    assert html.replace("<mark>", "").replace("</mark>", "") == "&lt;script&gt;alert(1)&lt;/script&gt; error"
    assert "<mark>script</mark>" in html


def test_markdown_escapes_raw_html_and_highlights_fences():
    html = str(
        markup.markdown("Use `x.cuda()`.\n\n<script>alert(1)</script>\n\n```python\nimport torch\n```")
    )
    assert "<code>x.cuda()</code>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert '<pre class="hl"><code><span class="kn">import</span>' in html


def test_diff_snippets_marks_only_changed_lines_and_escapes():
    broken, fixed = markup.diff_snippets(
        "import torch\nx = '<b>'\nprint(x)\n", "import torch\nx = 'b'\nprint(x)\n"
    )
    assert [changed for _, changed in broken] == [False, True, False]
    assert [changed for _, changed in fixed] == [False, True, False]
    assert "&lt;b&gt;" in str(broken[1][0]) and "<b>" not in str(broken[1][0])


def test_duration_and_when():
    assert (
        markup.duration(412) == "412 ms" and markup.duration(1530) == "1.5 s" and markup.duration(None) == ""
    )
    assert markup.when("2025-11-22T11:03:09+00:00") == "2025-11-22 11:03 UTC"
