"""Headless Chromium (issue 13): a curator signs in and turns a missed search into a draft; a reader
reports a wrong entry from the search results; the entry page shows the team's notes and takes
feedback without JavaScript; the proxy's header counts only from a trusted address."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.main import create_app

from .conftest import make_settings
from .support import SLUG, TRACEBACK, LiveServer, free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOKEN = "team-test-token"
OTHER = "view-non-contiguous"
MISSED = """Traceback (most recent call last):
  File "/home/quentin/lab/run.py", line 9, in <module>
    warp(core)
WarpCoreError: the warp core at /home/quentin/lab/core.bin breached after 12 jumps
"""
NOTE = "On our cluster, labels come from `labels_v2.csv`: check **its** class count first."


@pytest.fixture(scope="module")
def team_server(tmp_path_factory, content_dir, seed_db) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("team-live")
    team = tmp / "team"
    (team / "notes").mkdir(parents=True)
    (team / "notes" / f"{SLUG}.md").write_text(NOTE)
    settings = make_settings(tmp, content_dir, seed_db, team_content_dir=team, admin_token=TOKEN)
    with LiveServer(create_app(settings), free_port()) as server:
        server.team = team
        yield server


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors


def sign_in(page, server: LiveServer, then: str = "/team") -> None:
    page.goto(server.url + then)
    page.wait_for_url("**/sign-in?next=*")  # curator pages send readers to sign in, then back
    page.locator("input#token").fill(TOKEN)
    page.locator("form.sign-in-form button[type=submit]").click()
    page.wait_for_url(f"**{then}")


def test_curator_turns_a_missed_search_into_a_draft(page, team_server, artifacts):
    page.goto(team_server.url + "/")
    page.wait_for_function("window.htmx !== undefined")
    page.locator("textarea#q").fill(MISSED)  # the live search (htmx) answers in place
    page.wait_for_selector("#results .search-result[data-confident=false]")
    assert page.locator("#nav-sign-in").is_visible() and page.locator("#nav-team").count() == 0

    sign_in(page, team_server)
    assert page.locator("#who").inner_text() == "admin" and page.locator("#nav-team").is_visible()
    row = page.locator("table.misses tr", has=page.locator("code.template", has_text="WarpCoreError"))
    assert (
        row.locator("code.template").inner_text()
        == "WarpCoreError: the warp core at _path_ breached after _num_ jumps"
    )
    assert "quentin" not in page.content()
    row.locator("button", has_text="Create draft").click()
    page.wait_for_selector("#drafted")
    drafted = page.locator("#drafted code").first.inner_text()
    assert drafted.startswith("drafts/") and (team_server.team / drafted).is_file()
    assert "WarpCoreError: the warp core at _path_ breached" in (team_server.team / drafted).read_text()
    # the row now names the draft and who made it; the action is in the log
    assert drafted in row.inner_text() and "by admin" in row.inner_text()
    assert "draft created" in page.locator("#actions").inner_text()
    page.screenshot(path=str(artifacts / "team.png"), full_page=True)


def test_reader_reports_a_wrong_entry_from_the_results(page, team_server, artifacts):
    page.goto(team_server.url + "/")
    page.wait_for_function("window.htmx !== undefined")
    page.locator("textarea#q").fill(TRACEBACK)
    best = page.locator("#results li.hit.best")
    best.wait_for()
    best.locator("button", has_text="Wrong entry for my error").click()  # a plain form post
    page.wait_for_url("**/feedback")
    assert page.locator("pre.kept").inner_text() == "IndexError: Target _num_ is out of bounds."
    page.locator("select#used").select_option(OTHER)
    page.locator("textarea#comment").fill("my labels were right; it was the view")
    page.screenshot(path=str(artifacts / "team-feedback.png"), full_page=True)
    page.locator("form.feedback-form button[type=submit]").click()
    page.wait_for_selector("#feedback-thanks")
    assert "wrong entry" in page.locator("#feedback-thanks").inner_text()

    sign_in(page, team_server)
    counts = page.locator(f"#feedback-counts tr[data-slug={SLUG}]")
    assert counts.locator("td.wrong").inner_text() == "1"
    misrouted = page.locator("#misrouted li").first.inner_text()
    assert "IndexError: Target _num_ is out of bounds." in misrouted and OTHER in misrouted
    assert "my labels were right" in misrouted and "/home/ana" not in misrouted


def test_entry_page_shows_team_notes_and_takes_feedback_without_javascript(browser, team_server, artifacts):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(f"{team_server.url}/e/{SLUG}")
        notes = page.locator("section.team-notes")
        assert notes.locator("h2").inner_text() == "Your team's notes"
        assert (
            notes.locator("code").inner_text() == "labels_v2.csv"
            and notes.locator("strong").inner_text() == "its"
        )
        page.locator("section.team-notes").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "team-entry-nojs.png"))
        page.locator("section.feedback button", has_text="This solved it").click()
        page.wait_for_selector("#feedback-thanks")
        assert "solved it" in page.locator("#feedback-thanks").inner_text()
        page.goto(f"{team_server.url}/e/{OTHER}")
        assert page.locator("section.team-notes").count() == 0  # notes belong to their entry only
    finally:
        context.close()


@pytest.mark.parametrize("trusted, signed_in", [("10.0.0.0/8", False), ("127.0.0.1/32", True)])
def test_proxy_header_counts_only_from_a_trusted_address(
    browser, tmp_path, content_dir, seed_db, trusted, signed_in
):
    settings = make_settings(Path(tmp_path), content_dir, seed_db, trusted_proxies=trusted)
    context = browser.new_context(
        extra_http_headers={"X-Forwarded-User": "cora", "X-Forwarded-Groups": "curators"}
    )
    page = context.new_page()
    try:
        with LiveServer(create_app(settings), free_port()) as server:
            page.goto(server.url + "/team")
            if signed_in:
                assert page.url == server.url + "/team" and page.locator("#who").inner_text() == "cora"
                assert page.locator("#nav-user").inner_text() == "cora"
            else:
                assert "/sign-in?next=" in page.url and page.locator("#nav-user").count() == 0
    finally:
        context.close()


def test_team_pages_fit_a_phone(browser, team_server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    try:
        page.request.post(team_server.url + "/api/search", data={"q": MISSED.replace("12", "13")})
        page.request.post(
            team_server.url + "/api/feedback", data={"entry": SLUG, "verdict": "wrong", "q": TRACEBACK}
        )
        wide = []
        for path in ("/sign-in", f"/e/{SLUG}"):
            page.goto(team_server.url + path)
            if page.evaluate("document.documentElement.scrollWidth > window.innerWidth"):
                wide.append(path)
        sign_in(page, team_server)
        assert page.locator("table.misses tr").count() >= 2
        if page.evaluate("document.documentElement.scrollWidth > window.innerWidth"):
            wide.append("/team")
        page.goto(team_server.url + "/")
        page.locator("textarea#q").fill(TRACEBACK)
        page.locator("form.search button[type=submit]").click()
        page.wait_for_url("**/search")
        page.locator("#results li.hit.best button", has_text="Wrong entry for my error").click()
        page.wait_for_url("**/feedback")
        if page.evaluate("document.documentElement.scrollWidth > window.innerWidth"):
            wide.append("/feedback")
        assert not wide, f"pages wider than a phone: {wide}"
    finally:
        context.close()
