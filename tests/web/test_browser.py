"""Headless Chromium: paste a traceback, land on the entry, press Reproduce; with and without JavaScript.

Needs /usr/bin/chromium (Debian) and playwright; the Reproduce step runs on a real local worker
(`app.sandbox.agent`, torch on the CPU), so a run takes a few seconds. Screenshots go to artifacts/.
"""

from __future__ import annotations

import pytest

from app.categories import CATEGORIES

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the browser fixture skips these tests then
    PlaywrightTimeout = TimeoutError

from .support import SLUG, TRACEBACK

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN_TIMEOUT_MS = 180_000  # the first run waits for the worker to import torch and warm its pool


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def nojs_page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    yield page
    context.close()


def _wait_done(page, server) -> None:
    """Wait for the run panel to say done; on timeout, say what the panel and the workers showed."""
    try:
        page.wait_for_selector("#run-panel[data-state=done]", timeout=RUN_TIMEOUT_MS)
    except PlaywrightTimeout:
        health = page.request.get(server.url + "/healthz").text()
        pytest.fail(
            f"run not done in {RUN_TIMEOUT_MS} ms\npanel: {page.locator('#run-panel').inner_html()}"
            f"\nhealthz: {health}"
        )


def _check_outcomes(page) -> None:
    panel = page.locator("#run-panel")
    assert panel.get_attribute("data-state") == "done"
    assert page.locator("#run-panel article[data-part=broken]").get_attribute("data-outcome") == "raised"
    assert page.locator("#run-panel article[data-part=fixed]").get_attribute("data-outcome") == "ok"
    assert "IndexError" in page.locator("#run-panel article[data-part=broken] pre.err").inner_text()
    assert "loss:" in page.locator("#run-panel article[data-part=fixed] pre.out").inner_text()


def test_paste_open_reproduce_with_javascript(page, live_server, artifacts):
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live_server.url + "/")
    page.wait_for_function("window.htmx !== undefined")
    page.screenshot(path=str(artifacts / "home.png"), full_page=True)

    page.locator("textarea#q").fill(TRACEBACK)  # fires `input`: the debounced hx-post
    best = page.locator("#results li.hit.best a.hit-title")
    best.wait_for(timeout=10_000)
    assert best.get_attribute("href") == f"/e/{SLUG}"
    assert page.url == live_server.url + "/"  # results came in place, no navigation
    assert "IndexError" in page.locator("#results li.hit.best .matched mark").first.inner_text()
    page.screenshot(path=str(artifacts / "results.png"), full_page=True)

    best.click()
    page.wait_for_url(f"**/e/{SLUG}")
    page.wait_for_function("window.htmx !== undefined")
    page.evaluate("window.__same_document = true")  # gone if the page reloads
    assert page.locator("ul.sigs button.copy").first.is_visible()  # the script revealed copy buttons

    page.locator("#run-panel button[type=submit]").click()
    page.wait_for_selector("#run-panel[data-state=queued], #run-panel[data-state=running]", timeout=10_000)
    _wait_done(page, live_server)
    assert page.evaluate("window.__same_document") is True
    assert "?run=" not in page.url
    _check_outcomes(page)
    assert page.locator("#entry-badge .badge-pass").is_visible()  # updated out of band
    page.locator("#reproduce").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "entry.png"), full_page=True)
    assert not errors, errors


def test_paste_open_reproduce_without_javascript(nojs_page, live_server, artifacts):
    page = nojs_page
    page.goto(live_server.url + "/")
    page.locator("textarea#q").fill(TRACEBACK)
    page.locator("form.search button[type=submit]").click()  # a plain POST form
    page.wait_for_url("**/search")
    assert "?q=" not in page.url  # a whole traceback never ends up in the URL (history, logs, referers)
    best = page.locator("#results li.hit.best a.hit-title")
    assert best.get_attribute("href") == f"/e/{SLUG}"
    assert float(page.locator("#results li.hit.best .score").inner_text()) >= 0.8  # the score is shown
    page.screenshot(path=str(artifacts / "results-nojs.png"), full_page=True)

    best.click()
    page.wait_for_url(f"**/e/{SLUG}")
    assert page.locator("ul.sigs button.copy").first.is_hidden()  # no script, no dead buttons
    page.locator("#run-panel button[type=submit]").click()  # form POST -> 303 -> ?run=ID
    page.wait_for_url(f"**/e/{SLUG}?run=*")
    # the page refreshes itself (<noscript> meta refresh) until the run is done
    _wait_done(page, live_server)
    _check_outcomes(page)
    page.screenshot(path=str(artifacts / "entry-nojs.png"), full_page=True)


# Every entry page's body, laid out in turn under the stylesheet of a real entry page: the same
# check as navigating to each, in a fraction of the time (fetched eight at a time, no page loads).
ENTRY_BODY_WIDTHS = """async ({slugs, limit}) => {
  const wide = [];
  for (let i = 0; i < slugs.length; i += 8) {
    const batch = slugs.slice(i, i + 8);
    const pages = await Promise.all(batch.map(async (s) => {
      const r = await fetch('/e/' + s);
      return [s, r.status, await r.text()];
    }));
    for (const [slug, status, html] of pages) {
      if (status !== 200) { wide.push([slug, 'HTTP ' + status]); continue; }
      const body = new DOMParser().parseFromString(html, 'text/html').body;
      document.body.replaceWith(document.adoptNode(body));
      const width = document.documentElement.scrollWidth;
      if (width > limit) wide.push(['/e/' + slug, width]);
    }
  }
  return wide;
}"""


def test_phone_layout_has_no_horizontal_scroll(browser, live_server, artifacts):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    slugs = [e["slug"] for e in page.request.get(live_server.url + "/api/entries").json()]
    from urllib.parse import quote_plus

    long_paste = quote_plus(TRACEBACK + "\nRuntimeError: " + "x" * 300 + "/a/very/long/path/" * 20)
    paths = [
        "/",
        "/search?q=IndexError%3A+Target+5+is+out+of+bounds.",
        f"/search?q={long_paste}",
        *(f"/c/{c}" for c in CATEGORIES),
        f"/e/{SLUG}",
    ]
    try:
        wide = []
        for path in paths:
            page.goto(live_server.url + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 390:  # code blocks scroll inside themselves; the page itself must not
                wide.append((path, width))
            if path in ("/", f"/e/{SLUG}"):
                page.screenshot(
                    path=str(artifacts / f"{'home' if path == '/' else 'entry'}-phone.png"), full_page=True
                )
        assert len(slugs) > 100  # the whole knowledge base, not a sample
        wide += [tuple(w) for w in page.evaluate(ENTRY_BODY_WIDTHS, {"slugs": slugs, "limit": 390})]
        assert not wide, f"wider than a 390px phone: {wide}"
    finally:
        context.close()


def test_keyboard_reaches_search_and_shows_focus(page, live_server):
    page.goto(live_server.url + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    assert page.locator("a.skip").is_visible()
    page.keyboard.press("Enter")
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "q":
            break
    assert page.evaluate("document.activeElement.id") == "q"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"


def test_reproduce_works_when_htmx_fails_to_load(page, live_server):
    """JavaScript on, but the htmx script blocked (a CDN out of reach, a strict proxy): the plain form
    still posts and the page then refreshes itself until the run is done."""
    page.route("**/htmx.min.js", lambda route: route.abort())
    page.goto(live_server.url + "/e/nan-loss")
    page.locator("#run-panel button[type=submit]").click()
    page.wait_for_url("**/e/nan-loss?run=*", timeout=30_000)
    page.wait_for_selector("#run-panel[data-state=done]", timeout=RUN_TIMEOUT_MS)
