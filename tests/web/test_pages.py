"""HTML pages: structure, page vs fragment, Vary, escaping, the no-JavaScript paths (issue 4)."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from bs4 import BeautifulSoup
from jinja2 import StrictUndefined

from app.categories import CATEGORIES
from app.web import templating

from .support import HX, SLUG, TRACEBACK, add_result, add_run

XSS = "<script>alert('pwned')</script>"


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.text, "html.parser")


def scripts_with(doc: BeautifulSoup, needle: str) -> list:
    return [s for s in doc.find_all("script") if needle in (s.string or "")]


# -- plumbing -----------------------------------------------------------------------------------
def test_templates_escape_and_fail_loudly_on_missing_variables():
    env = templating.templates.env
    assert env.undefined is StrictUndefined
    assert env.autoescape is True or env.autoescape("x.html")


def test_vendored_htmx_matches_pinned_version_and_sri():
    path = templating.STATIC_DIR / "vendor" / "htmx.min.js"
    data = path.read_bytes()
    assert f'version:"{templating.HTMX_VERSION}"' in data.decode()
    digest = base64.b64encode(hashlib.sha384(data).digest()).decode()
    assert f"sha384-{digest}" == templating.HTMX_SRI
    assert templating.HTMX_VERSION in templating.HTMX_CDN


def test_htmx_local_copy_when_setting_is_on(client):
    doc = soup(client.get("/"))
    src = [s["src"] for s in doc.find_all("script", src=True)]
    assert "/static/vendor/htmx.min.js" in src
    assert not any("cdn" in s for s in src)
    assert client.get("/static/vendor/htmx.min.js").status_code == 200


def test_htmx_from_cdn_is_pinned_with_integrity(client, app):
    original = app.state.settings
    app.state.settings = original.model_copy(update={"htmx_local": False})
    try:
        doc = soup(client.get("/"))
    finally:
        app.state.settings = original
    tag = doc.find("script", src=templating.HTMX_CDN)
    assert tag is not None
    assert tag["integrity"] == templating.HTMX_SRI and tag["crossorigin"] == "anonymous"
    assert "@2." in tag["src"]


def test_pages_render_their_template_with_context(client):
    r = client.get(f"/e/{SLUG}")
    assert r.template.name == "entry.html"
    assert {"entry", "panel"} <= set(r.context)
    r = client.get(f"/e/{SLUG}", headers=HX)
    assert r.template.name == "_entry.html"


# -- home ---------------------------------------------------------------------------------------
def test_home_lists_nine_categories_with_counts(client):
    doc = soup(client.get("/"))
    cards = doc.select("#categories li.card")
    assert len(cards) == 9
    api = {c["name"]: c for c in client.get("/api/categories").json()}
    for card, name in zip(cards, CATEGORIES, strict=True):
        assert card.a["href"] == f"/c/{name}"
        assert card.select_one(".card-title").get_text() == CATEGORIES[name][0]
        assert card.select_one(".count").get_text().startswith(str(api[name]["count"]))
        assert card.p.get_text() == CATEGORIES[name][1]


def test_home_search_is_a_labelled_post_form_with_live_htmx(client):
    doc = soup(client.get("/"))
    form = doc.select_one("form.search")
    assert form["method"] == "post" and form["action"] == "/search"  # a traceback never goes in the URL
    box = form.select_one("textarea#q")
    assert box["name"] == "q"
    assert doc.select_one("label[for=q]").get_text(strip=True)
    assert box["hx-post"] == "/search" and box["hx-target"] == "#results"
    assert "delay:" in box["hx-trigger"]  # debounced
    assert form.select_one("button[type=submit]")
    assert doc.select_one("a.skip[href='#main']") and doc.select_one("main#main")


def test_home_shows_recently_reproduced_entries(client, app):
    add_result(app, "nan-loss", "broken", {"outcome": "wrong", "device": "cpu", "torch_version": "2.9.0"})
    doc = soup(client.get("/"))
    assert doc.select_one("a[href='/e/nan-loss']")


# -- search -------------------------------------------------------------------------------------
def test_search_fragment_for_htmx_full_page_otherwise(client):
    page = client.get("/search", params={"q": "IndexError: Target 7 is out of bounds."})
    frag = client.post("/search", data={"q": "IndexError: Target 7 is out of bounds."}, headers=HX)
    assert page.status_code == frag.status_code == 200
    assert page.headers["vary"] == frag.headers["vary"] == "HX-Request"
    assert page.text.lstrip().lower().startswith("<!doctype html>")
    assert "<html" not in frag.text and "<head" not in frag.text
    for doc in (soup(page), soup(frag)):
        best = doc.select_one("li.hit.best a.hit-title")
        assert best["href"] == f"/e/{SLUG}"


def test_search_traceback_shows_category_title_marks_and_ignored(client):
    doc = soup(client.post("/search", data={"q": TRACEBACK}, headers=HX))
    result = doc.select_one(".search-result")
    assert result["data-confident"] == "true"
    best = doc.select_one("li.hit.best")
    assert best.select_one(".cat a")["href"] == "/c/loss"
    marked = " ".join(m.get_text() for m in best.select(".matched code mark"))
    assert "IndexError" in marked and "out of bounds" in marked
    assert "11" not in marked and "5" not in marked  # the number was set aside, not matched
    ignored = doc.select_one(".ignored").get_text()
    assert ignored.startswith("Ignored:") and "number" in ignored and "traceback frame" in ignored


def test_search_without_confident_match_says_so_and_offers_categories(client):
    doc = soup(client.get("/search", params={"q": "my loss curve looks a bit strange after warmup"}))
    result = doc.select_one(".search-result")
    assert result["data-confident"] == "false"
    assert "No confident match" in doc.select_one(".notice h2").get_text()
    assert not doc.select("li.hit.best")
    assert doc.select(".notice a[href^='/c/']") or doc.select("nav.all-cats a[href^='/c/']")


def test_search_nothing_found_offers_all_categories(client):
    doc = soup(client.get("/search", params={"q": "qzqzq vxvxv jqjqj"}))
    assert "No confident match" in doc.get_text()
    assert len(doc.select("nav.all-cats a")) == 9


def test_search_empty_box_is_not_an_error(client):
    assert client.post("/search", data={"q": "  "}, headers=HX).text.strip() == ""
    page = client.get("/search")
    assert page.status_code == 200 and soup(page).select_one("textarea#q")


def test_search_too_large_is_413_with_a_message(client, app):
    searcher = app.state.searcher
    original, searcher.max_query_bytes = searcher.max_query_bytes, 100
    try:
        r = client.post("/search", data={"q": "x" * 200}, headers=HX)
    finally:
        searcher.max_query_bytes = original
    assert r.status_code == 413
    assert "larger than" in soup(r).select_one("[role=alert]").get_text()


def test_search_echo_is_escaped(client):
    r = client.get("/search", params={"q": f"RuntimeError: {XSS}"})
    doc = soup(r)
    assert not scripts_with(doc, "pwned")
    assert XSS in doc.select_one("textarea#q").get_text()
    assert "<script>alert" not in r.text


# -- categories ---------------------------------------------------------------------------------
def test_category_lists_entries_with_summaries_and_badges(client, app):
    add_result(
        app,
        SLUG,
        "broken",
        {
            "outcome": "raised",
            "exc_type": "IndexError",
            "device": "NVIDIA H100 80GB HBM3",
            "torch_version": "2.11.0+cu128",
        },
    )
    add_result(
        app,
        SLUG,
        "fixed",
        {"outcome": "ok", "device": "NVIDIA H100 80GB HBM3", "torch_version": "2.11.0+cu128"},
    )
    r = client.get("/c/loss")
    assert r.status_code == 200 and r.headers["vary"] == "HX-Request"
    doc = soup(r)
    assert doc.h1.get_text() == CATEGORIES["loss"][0]
    api = client.get("/api/entries", params={"category": "loss"}).json()
    items = doc.select("li.entry-item")
    assert [i.h2.a["href"] for i in items] == [
        f"/e/{e['slug']}" for e in sorted(api, key=lambda e: e["title"])
    ]
    assert all(i.p.get_text(strip=True) for i in items)  # summaries
    ours = next(i for i in items if i.h2.a["href"] == f"/e/{SLUG}")
    assert ours.select_one(".badge-pass").get_text() == "verified"
    detail = ours.select_one(".badge-detail").get_text()
    assert "NVIDIA H100" in detail and "torch 2.11.0+cu128" in detail and "UTC" in detail
    assert any(i.select_one(".badge-none") for i in items)  # others: "not yet run"


def test_category_summary_markdown_is_rendered_not_raw(client):
    doc = soup(client.get("/c/loss"))
    summaries = " ".join(str(i.p) for i in doc.select("li.entry-item"))
    rendered = BeautifulSoup(summaries, "html.parser")
    assert rendered.code  # `code` became <code>
    for code in rendered.select("code"):  # (a code span may hold a backtick: ``Assertion `x` failed``)
        code.decompose()
    assert "`" not in rendered.get_text()


@pytest.mark.parametrize("url", ["/c/nope", "/e/no-such-entry", "/runs/999999"])
def test_unknown_pages_are_styled_404s(client, url):
    r = client.get(url)
    assert r.status_code == 404 and r.headers["vary"] == "HX-Request"
    doc = soup(r)
    assert doc.find("link", rel="stylesheet") and doc.h1.get_text() == "Not found"
    frag = client.get(url, headers=HX)
    assert frag.status_code == 404 and "<html" not in frag.text


def test_not_found_echo_is_escaped(client):
    r = client.get("/c/%3Cscript%3Ealert('pwned')%3C%2Fscript%3E")
    assert r.status_code == 404 and not scripts_with(soup(r), "pwned")


# -- entry --------------------------------------------------------------------------------------
def test_entry_puts_error_and_fix_first(client):
    doc = soup(client.get(f"/e/{SLUG}"))
    headings = [h.get_text() for h in doc.select("article.entry h2")]
    assert headings.index("The error") < headings.index("Fix") < headings.index("Cause")
    assert headings.index("Fix") < headings.index("Broken and fixed, side by side")


def test_entry_signatures_with_copy_buttons_and_permalink(client):
    api = client.get(f"/api/entries/{SLUG}").json()
    doc = soup(client.get(f"/e/{SLUG}"))
    sigs = doc.select("ul.sigs li")
    assert [li.code.get_text() for li in sigs] == api["signatures"]
    for li in sigs:
        assert li.select_one("button.copy")["data-copy"] == f"#{li.code['id']}"
    assert doc.select_one("a#permalink")["href"] == f"/e/{SLUG}"
    assert doc.find("link", rel="canonical")["href"] == f"/e/{SLUG}"


def test_entry_links_the_other_causes_of_its_message(client):
    # "Expected all tensors to be on the same device" has several causes in the knowledge base: a
    # reader who landed on one sees the others, each a working link
    doc = soup(client.get("/e/tensor-created-on-wrong-device"))
    links = {a["href"] for a in doc.select("aside.other-causes a")}
    assert {"/e/optimizer-state-on-cpu-after-resume", "/e/register-buffer-for-state"} <= links
    assert "/e/tensor-created-on-wrong-device" not in links
    for href in links:
        assert client.get(href).status_code == 200, href
    # an error with one known cause shows no such list
    assert not soup(client.get("/e/view-non-contiguous")).select("aside.other-causes")


def test_entry_markdown_and_highlighted_code(client):
    doc = soup(client.get(f"/e/{SLUG}"))
    fix = doc.select_one("section.fix .prose")
    assert fix.find("li") and fix.find("code") and "**" not in fix.get_text()
    broken = doc.select_one("#code-broken")
    assert broken.select("span.ln .kn")  # Pygments keyword spans ("import")
    assert "import torch" in broken.get_text()


def test_entry_snippets_side_by_side_with_changed_lines_marked(client):
    doc = soup(client.get(f"/e/{SLUG}"))
    broken, fixed = doc.select("#code-broken span.ln"), doc.select("#code-fixed span.ln")
    changed_b = [s.get_text() for s in broken if "chg" in s["class"]]
    changed_f = [s.get_text() for s in fixed if "chg" in s["class"]]
    assert changed_b and changed_f
    assert any("labels = torch.tensor" in t for t in changed_b)
    assert any("- 1" in t for t in changed_f)
    assert not any(
        s.get_text() == "import torch" and "chg" in s["class"] for s in broken
    )  # shared lines unmarked
    assert doc.select_one(".code-pair figure.broken") and doc.select_one(".code-pair figure.fixed")


def test_entry_details_versions_requirements_sources(client):
    api = client.get(f"/api/entries/{SLUG}").json()
    details = soup(client.get(f"/e/{SLUG}")).select_one("section.details")
    text = details.get_text()
    assert api["torch"] in text and "CPU only" in text
    assert [a["href"] for a in details.select("a")] == api["sources"]


def test_entry_latest_outcomes_side_by_side(client, app):
    add_result(
        app,
        SLUG,
        "broken",
        {
            "outcome": "raised",
            "exc_type": "IndexError",
            "message": "Target 5 is out of bounds.",
            "device": "cpu",
            "torch_version": "2.13.0+cpu",
            "duration_ms": 41,
        },
    )
    add_result(
        app,
        SLUG,
        "fixed",
        {
            "outcome": "ok",
            "stdout": "loss: 1.93\n",
            "device": "cpu",
            "torch_version": "2.13.0+cpu",
            "duration_ms": 1530,
        },
    )
    doc = soup(client.get(f"/e/{SLUG}"))
    panel = doc.select_one("#run-panel")
    assert panel["data-state"] == "stored" and not panel.has_attr("hx-trigger")
    broken, fixed = panel.select_one("[data-part=broken]"), panel.select_one("[data-part=fixed]")
    assert "IndexError: Target 5 is out of bounds." in broken.select_one("pre.err").get_text()
    assert "loss: 1.93" in fixed.select_one("pre.out").get_text()
    facts = broken.select_one(".facts").get_text(" ")
    assert "cpu" in facts and "torch 2.13.0+cpu" in facts and "41 ms" in facts and "UTC" in facts
    assert "1.5 s" in fixed.select_one(".facts").get_text()


def test_every_entry_page_renders_under_100_kb_without_htmx(client):
    """Issue 4: an entry page (HTML + CSS + our script, htmx excluded) weighs at most 100 KB."""
    first = soup(client.get(f"/e/{SLUG}"))
    assets = [link["href"] for link in first.find_all("link", rel="stylesheet")]
    assets += [tag["src"] for tag in first.find_all("script", src=True) if "htmx" not in tag["src"]]
    assert assets == ["/static/site.css", "/static/app.js"]
    extra = sum(len(client.get(a).content) for a in assets)
    heaviest = (0, "")
    for e in client.get("/api/entries").json():
        r = client.get(f"/e/{e['slug']}")
        assert r.status_code == 200, e["slug"]
        heaviest = max(heaviest, (len(r.content), e["slug"]))
    assert heaviest[0] + extra <= 100_000, f"{heaviest[1]} weighs {heaviest[0] + extra} bytes"


# -- escaping of run output ---------------------------------------------------------------------
def test_stored_error_and_stdout_with_script_show_as_text(client, app):
    add_result(
        app,
        "nan-loss",
        "broken",
        {
            "outcome": "raised",
            "exc_type": "RuntimeError",
            "message": XSS,
            "stdout": f"{XSS}\n<img src=x onerror=alert(1)>",
            "traceback": XSS,
            "warnings": [{"category": "UserWarning", "message": XSS}],
            "device": "<b>cpu</b>",
            "torch_version": "2.9",
        },
    )
    r = client.get("/e/nan-loss")
    doc = soup(r)
    assert not scripts_with(doc, "pwned") and not doc.find("img") and not doc.find("b", string="cpu")
    card = doc.select_one("[data-part=broken]")
    assert XSS in card.select_one("pre.err").get_text()
    assert "<img src=x onerror=alert(1)>" in card.select_one("pre.out").get_text()
    assert "&lt;script&gt;" in r.text


def test_run_output_with_script_shows_as_text(client, app):
    bad = {
        "outcome": "raised",
        "exc_type": "RuntimeError",
        "message": XSS,
        "stdout": XSS,
        "stderr": XSS,
        "device": "cpu",
        "torch_version": "2.9",
        "expected": True,
    }
    run_id = add_run(app, SLUG, results={"broken": bad, "fixed": {**bad, "outcome": "ok", "exc_type": None}})
    for r in (
        client.get(f"/runs/{run_id}"),
        client.get(f"/runs/{run_id}", headers=HX),
        client.get(f"/e/{SLUG}", params={"run": run_id}),
    ):
        doc = soup(r)
        assert not scripts_with(doc, "pwned")
        assert XSS in doc.select_one("[data-part=broken] pre.err").get_text()


# -- reproduce ----------------------------------------------------------------------------------
def test_reproduce_without_javascript_posts_and_redirects(client):
    doc = soup(client.get(f"/e/{SLUG}"))
    form = doc.select_one("#run-panel form")
    assert form["method"] == "post" and form["action"] == f"/e/{SLUG}/reproduce"
    r = client.post(form["action"], follow_redirects=False)
    assert r.status_code == 303
    location = r.headers["location"]
    assert re.fullmatch(rf"/e/{SLUG}\?run=\d+#reproduce", location)
    page = soup(client.get(location))
    assert page.select_one("#run-panel")["data-state"] == "queued"
    refresh = page.head.select_one("noscript meta[http-equiv=refresh]")
    run_id = re.search(r"run=(\d+)", location)[1]
    # alternates between two URLs: a refresh to the very same URL#fragment would only scroll
    assert refresh["content"] == f"2; url=/e/{SLUG}?run={run_id}&wait=1#reproduce"
    again = soup(client.get(f"/e/{SLUG}?run={run_id}&wait=1"))
    assert again.head.select_one("noscript meta[http-equiv=refresh]")["content"].endswith(
        f"?run={run_id}#reproduce"
    )
    assert page.select_one("#run-panel button[type=submit]").has_attr("disabled")


def test_reproduce_with_htmx_returns_self_polling_panel(client):
    r = client.post(f"/e/{SLUG}/reproduce", headers=HX)
    assert r.status_code == 202 and r.headers["vary"] == "HX-Request"
    panel = soup(r).select_one("#run-panel")
    assert panel["data-state"] == "queued"
    assert panel["hx-trigger"] == "load delay:500ms" and panel["hx-swap"] == "outerHTML"
    assert re.fullmatch(r"/runs/\d+", panel["hx-get"])
    assert "<html" not in r.text


def test_run_panel_polls_until_done_then_stops(client, app):
    results = {
        "broken": {
            "outcome": "raised",
            "exc_type": "IndexError",
            "message": "Target 5 is out of bounds.",
            "device": "cpu",
            "torch_version": "2.13.0",
            "duration_ms": 12,
            "expected": True,
        },
        "fixed": {
            "outcome": "ok",
            "stdout": "loss: 1.9",
            "device": "cpu",
            "torch_version": "2.13.0",
            "duration_ms": 15,
            "expected": True,
        },
    }
    for state, polls in (("queued", True), ("running", True), ("done", False)):
        run_id = add_run(app, SLUG, state=state, results=results if state == "done" else {})
        frag = client.get(f"/runs/{run_id}", headers=HX)
        panel = soup(frag).select_one("#run-panel")
        assert panel["data-state"] == state
        assert panel.has_attr("hx-trigger") is polls, state
        assert frag.headers["vary"] == "HX-Request"
        # once done, the entry's verification badge is refreshed out of band
        assert bool(soup(frag).select("#entry-badge[hx-swap-oob]")) is not polls, state
    cards = panel.select("article.outcome")
    assert [c["data-outcome"] for c in cards] == ["raised", "ok"]
    page = client.get(f"/runs/{run_id}")
    assert page.text.lower().lstrip().startswith("<!doctype") and not soup(page).head.find("noscript")


def test_reproduce_when_queue_is_full_is_a_friendly_503(client, app):
    original = app.state.settings
    app.state.settings = original.model_copy(update={"queue_max": 0})
    try:
        # an entry with no run waiting (a waiting one would be shared, full queue or not)
        frag = client.post("/e/nan-loss/reproduce", headers=HX)
        page = client.post("/e/nan-loss/reproduce", follow_redirects=False)
    finally:
        app.state.settings = original
    for r in (frag, page):
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        assert "queue is full" in soup(r).select_one("#run-panel [role=alert]").get_text()
    assert soup(page).h1 is not None  # the whole entry page, not a bare message


def test_reproduce_unknown_entry_is_404(client):
    assert client.post("/e/no-such-entry/reproduce", follow_redirects=False).status_code == 404


def test_entry_ignores_a_run_of_another_entry(client, app):
    run_id = add_run(app, "nan-loss", state="queued")
    doc = soup(client.get(f"/e/{SLUG}", params={"run": run_id}))
    assert doc.select_one("#run-panel")["data-state"] != "queued"


def test_gpu_entry_says_before_the_click_that_no_gpu_worker_is_there(client, app):
    from sqlmodel import Session

    from app.models import Worker, utcnow

    gpu_slug, cpu_slug = "cuda-out-of-memory", SLUG
    page = soup(client.get(f"/e/{gpu_slug}"))
    note = page.select_one("#run-panel .gpu-needed")
    assert note and "needs a CUDA GPU" in note.get_text() and "skipped" in note.get_text()
    assert not soup(client.get(f"/e/{cpu_slug}")).select_one("#run-panel .gpu-needed")
    with Session(app.state.engine) as session:  # a GPU worker checks in: the warning goes
        session.add(
            Worker(id="gpu-box", device="NVIDIA H100", torch_version="2.11", gpus=1, last_seen=utcnow())
        )
        session.commit()
    assert not soup(client.get(f"/e/{gpu_slug}")).select_one("#run-panel .gpu-needed")


@pytest.mark.parametrize(
    "broken, fixed, marked_broken, marked_fixed",
    [
        ("a = 1\nb = f(a)\nprint(b)", "a = 1\nb = g(a)\nprint(b)", [1], [1]),
        (
            "a = 1  # old comment\nprint(a)",
            "a = 1  # new comment\nprint(a)",
            [],
            [],
        ),  # comments are not changes
        (
            "x = 1\ny = 2\nz = 3\nw = 4",
            "p = 1\nq = 2\nr = 3\nw = 4",
            [],
            [],
        ),  # mostly different: no marks at all
    ],
)
def test_changed_line_marks(broken, fixed, marked_broken, marked_fixed):
    from app.web.markup import diff_snippets

    a, b = diff_snippets(broken, fixed)
    assert [i for i, (_, changed) in enumerate(a) if changed] == marked_broken
    assert [i for i, (_, changed) in enumerate(b) if changed] == marked_fixed
