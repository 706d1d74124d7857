"""Everyday details of the console in Debian's Chromium against a real `ctxstore serve` (issue 25): no page
logs a console error (the icon included), the file input shows its focus, BYOG column names read as typed,
refusals are headed by what happened, the webhook test event is listed under Deliveries, the lists carry
what a person looks for (counts, last activity, search, first words, human sizes, one timestamp format) and
nothing is pushed off a 1024x700 screen.

One server and one browser for the module; the tests run in order on one page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import ConsoleMessage, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.console.browser import sign_in
from tests.console.test_console_flows import Receiver
from tests.fakes.slack_api import FakeSlack
from tests.support.server import ServerProcess

DB = "daily"
SLACK_TOKEN = "xoxb-everyday-test-secret"
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?(\.\d+)?Z?( UTC)?")
ONE_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")


@pytest.fixture(scope="module")
def errors(page: Page) -> list[str]:
    """Every console error and uncaught exception of the module's page."""
    seen: list[str] = []

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            seen.append(f"{page.url}: {msg.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: seen.append(f"{page.url}: {exc}"))
    return seen


@pytest.fixture(scope="module")
def seeded(server: ServerProcess, admin_key: str, slack: FakeSlack) -> Iterator[dict[str, Any]]:
    api = server.client(admin_key)
    assert api.post("/databases", json={"database": DB}).status_code == 202
    items = [
        {"id": "guide-1", "title": "Onboarding guide", "content": {"text": "# Welcome\n\nRead **this** first."}},
        {"id": "notes-2", "title": "Release notes", "content": {"text": "Version 2 ships <script>x()</script>."}},
    ]
    r = api.post("/context/ingest", data={"database": DB, "app_knowledge": json.dumps(items)})
    assert r.status_code == 202, r.text
    memory = [{"user_assistant_pairs": [{"user": "Where do I park the bikes tonight?", "assistant": "Shed B."}]}]
    r = api.post("/context/ingest", data={"database": DB, "type": "memory", "memories": json.dumps(memory)})
    assert r.status_code == 202, r.text
    memory_id = r.json()["data"]["results"][0]["id"] if "data" in r.json() else r.json()["results"][0]["id"]
    assert api.post("/byog/databases", json={"database": "daily-kg"}).status_code == 200
    slack.add_token(SLACK_TOKEN)
    slack.add_channel("C0DAILY", "daily-standup-and-other-long-channel-names")
    body = {"provider": "slack", "database": DB, "credentials": {"access_token": SLACK_TOKEN}}
    made = api.post("/connectors", json=body)
    assert made.status_code == 201, made.text
    connector = made.json().get("data", made.json())["connector_id"]
    r = api.post(f"/connectors/{connector}/configure", json={"resources": [{"resource_id": "C0DAILY"}]})
    assert r.status_code == 200, r.text
    yield {"api": api, "memory": memory_id, "connector": connector}
    api.close()


def _visible_text(page: Page) -> str:
    return page.locator("main").inner_text()


def test_sign_in(page: Page, server: ServerProcess, admin_key: str, errors: list[str], seeded: Any) -> None:
    sign_in(page, server.base_url, admin_key)


def test_the_databases_list_shows_item_counts_and_last_activity(page: Page, server: ServerProcess) -> None:
    page.goto(server.base_url + "/console/databases")
    tile = page.locator(".tile", has_text=DB)
    expect(tile.locator("[data-db-summary]")).to_contain_text("3 items")
    expect(tile.locator("[data-db-summary]")).to_contain_text(
        re.compile(r"last added \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    )


def test_items_search_by_title_or_id_and_untitled_items_show_their_first_words(
    page: Page, server: ServerProcess, seeded: dict[str, Any]
) -> None:
    base = server.base_url + f"/console/databases/{DB}/items"
    page.goto(base)
    expect(page.locator("#item-rows tbody tr")).to_have_count(2)
    page.fill("#flt-text", "onboard")
    page.click("text=Apply filters")
    expect(page.locator("#item-rows tbody tr")).to_have_count(1)
    expect(page.locator("#item-rows")).to_contain_text("Onboarding guide")
    page.fill("#flt-text", "NOTES-2")  # an id, in any case
    page.click("text=Apply filters")
    expect(page.locator("#item-rows tbody tr")).to_have_count(1)
    expect(page.locator("#item-rows")).to_contain_text("Release notes")
    page.goto(base + "?type=memory")
    row = page.locator("#item-rows tbody tr").first
    expect(row.locator("a")).to_have_text("Where do I park the bikes tonight?")
    assert seeded["memory"] not in row.locator("a").inner_text()
    row.locator("a").click()
    expect(page.locator("h1")).to_have_text("Where do I park the bikes tonight?")


def test_item_pages_render_markdown_safely_and_sizes_in_human_units(page: Page, server: ServerProcess) -> None:
    page.goto(server.base_url + f"/console/databases/{DB}/item?id=guide-1&collection=&type=knowledge")
    content = page.locator("[data-content]")
    expect(content.locator("h3", has_text="Welcome")).to_have_count(1)  # '# Welcome', below the page's h1 and h2
    expect(page.locator("h1")).to_have_count(1)
    expect(content.locator("strong")).to_have_text("this")
    size = page.locator("dt:text-is('Size') + dd")
    expect(size).to_have_text(re.compile(r"^\d+ bytes?$|^\d+\.\d (KB|MB)$"))
    page.goto(server.base_url + f"/console/databases/{DB}/item?id=notes-2&collection=&type=knowledge")
    content = page.locator("[data-content]")
    expect(content).to_contain_text("<script>x()</script>")  # shown as text, never run or injected
    assert content.locator("script").count() == 0


def test_every_timestamp_has_one_format(page: Page, server: ServerProcess, seeded: dict[str, Any]) -> None:
    pages = [
        "/console/databases",
        f"/console/databases/{DB}/items",
        f"/console/databases/{DB}/items?type=memory",
        f"/console/databases/{DB}/item?id=guide-1&collection=&type=knowledge",
        "/console/keys",
    ]
    for path in pages:
        page.goto(server.base_url + path)
        stamps = [m.group(0) for m in STAMP.finditer(_visible_text(page))]
        assert stamps, path
        assert all(ONE_FORMAT.fullmatch(s) for s in stamps), (path, stamps)


def test_the_file_input_shows_its_focus(page: Page, server: ServerProcess) -> None:
    page.goto(server.base_url + f"/console/databases/{DB}/items")
    label = page.locator("label[for=file-input]")

    def ring() -> tuple[str, str]:
        style = "el => { const s = getComputedStyle(el); return [s.outlineStyle + ' ' + s.outlineWidth, s.boxShadow]; }"
        got = label.evaluate(style)
        return str(got[0]), str(got[1])

    before = ring()
    page.focus("#file-input")
    assert page.evaluate("() => document.activeElement.id") == "file-input"
    after = ring()
    assert after != before and ("solid" in after[0] or after[1] != "none"), (before, after)


def test_byog_headers_read_as_typed_and_refusals_say_what_happened(page: Page, server: ServerProcess) -> None:
    page.goto(server.base_url + "/console/byog/daily-kg")
    page.fill("#cy-query", "RETURN 1 AS name, 2 AS Name, 3 AS i")
    page.fill("#cy-params", "")
    page.click("button:has-text('Run')")
    headers = page.locator("#byog-results th")
    expect(headers).to_have_count(3)
    assert headers.all_inner_texts() == ["name", "Name", "i"]
    page.fill("#cy-query", "CALL db.labels()")
    page.click("button:has-text('Run')")
    heading = page.locator("#byog-results [data-rejection] strong")
    expect(heading).to_have_text("The graph database refused this query.")


def _open(page: Page, url: str, selector: str) -> None:
    """Open a page and wait for one of its elements; once more if a late navigation of the page before (an htmx
    request still settling) took the browser elsewhere (seen intermittently on the webhooks page)."""
    for attempt in range(3):
        page.goto(url)
        try:
            page.locator(selector).wait_for(timeout=5000)
            return
        except PlaywrightTimeoutError:
            if attempt == 2:
                raise AssertionError(f"{selector} never appeared at {url}; the browser is at {page.url}") from None


def test_a_refused_webhook_url_and_the_test_event_under_deliveries(page: Page, server: ServerProcess) -> None:
    receiver = Receiver()
    try:
        _open(page, server.base_url + "/console/webhooks", "#wh-url")
        page.fill("#wh-url", "http://169.254.169.254/latest")
        page.click("text=Register endpoint")
        expect(page.locator(".alert strong")).to_have_text("That URL cannot receive webhooks.")
        page.fill("#wh-url", receiver.url)
        page.click("text=Register endpoint")
        expect(page.locator("#new-secret")).to_have_value(re.compile(r"^whsec_.+"))
        receiver.accept = True
        page.click("text=Send a test event")
        expect(page).to_have_url(re.compile(r"/console/webhooks\?outcome="))
        expect(page.locator("p[role=status]", has_text="Test event")).to_contain_text("delivered (HTTP 200)")
        row = page.locator("#deliveries tbody tr", has_text="webhook.test")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("completed")
        page.reload()  # a GET address: the reload sends nothing again
        expect(page.locator("#deliveries tbody tr", has_text="webhook.test")).to_have_count(1)
        # Items of the seeded databases may still be indexing: their status events arrive too; one test event.
        assert sum(json.loads(b)["type"] == "webhook.test" for b in receiver.bodies) == 1
    finally:
        receiver.close()


def test_api_keys_have_names(page: Page, server: ServerProcess) -> None:
    page.goto(server.base_url + "/console/keys")
    page.fill("#key-name", "billing worker")
    page.click("text=Create key")
    prefix = page.input_value("#new-key").split("_")[1]
    expect(page.locator("#new-key-title")).to_contain_text("billing worker")
    page.goto(server.base_url + "/console/keys")
    row = page.locator("tbody tr", has_text=prefix)
    expect(row.locator("[data-key-name]")).to_have_text("billing worker")
    page.fill("#key-name", "x" * 81)  # the field stops at 80; the service refuses more all the same
    assert len(page.input_value("#key-name")) == 80


def test_adding_an_item_leaves_a_get_address_that_reloads_without_posting(
    page: Page, server: ServerProcess, seeded: dict[str, Any]
) -> None:
    page.goto(server.base_url + f"/console/databases/{DB}/items")
    page.click("summary:has-text('Add an app item')")
    page.fill("#app-title", "Team lunch")
    page.fill("#app-text", "Thursday at noon.")
    page.click("form[action*='app-items'] button[type=submit]")
    expect(page.locator(".notice")).to_contain_text("Accepted")
    assert "/app-items" not in page.url and f"/databases/{DB}/items?" in page.url
    page.reload()
    expect(page.locator(".notice")).to_contain_text("Accepted")
    listed = seeded["api"].post("/context/list", json={"database": DB}).json()
    rows = listed.get("data", listed)["sources"]
    assert [r["title"] for r in rows].count("Team lunch") == 1, "the reload posted nothing again"


def test_at_1024x700_the_playground_results_are_in_view_and_no_table_scrolls_sideways(
    page: Page, server: ServerProcess, seeded: dict[str, Any]
) -> None:
    page.set_viewport_size({"width": 1024, "height": 700})
    try:
        page.goto(server.base_url + f"/console/databases/{DB}/playground")
        page.fill("#q", "onboarding guide")
        page.click("text=Run query")
        results = page.locator("#results")
        expect(results.locator(".chunk").first).to_be_visible()
        top = results.evaluate("el => el.getBoundingClientRect().top")
        assert top < 700, f"the results start {top}px down: below the fold"
        for path in (
            f"/console/databases/{DB}/items",
            f"/console/databases/{DB}/items?type=memory",
            "/console/keys",
            "/console/webhooks",
            "/console/connectors",
            f"/console/connectors/{seeded['connector']}",
            f"/console/databases/{DB}",
        ):
            page.goto(server.base_url + path)
            wide = page.evaluate(
                "() => [...document.querySelectorAll('.table-wrap')]"
                ".filter(w => w.scrollWidth > w.clientWidth + 1).map(w => w.scrollWidth + '>' + w.clientWidth)"
            )
            assert not wide, (path, wide)
    finally:
        page.set_viewport_size({"width": 1366, "height": 860})


def test_no_page_logged_a_console_error(page: Page, server: ServerProcess, errors: list[str]) -> None:
    errors.clear()  # the refusals above answered 4xx on purpose, which Chromium logs; here every page is fine
    for path in (
        "/console/databases",
        f"/console/databases/{DB}",
        f"/console/databases/{DB}/items",
        f"/console/databases/{DB}/item?id=guide-1&collection=&type=knowledge",
        f"/console/databases/{DB}/playground",
        f"/console/databases/{DB}/graph",
        "/console/byog",
        "/console/byog/daily-kg",
        "/console/connectors",
        "/console/connectors/new",
        "/console/webhooks",
        "/console/keys",
    ):
        page.goto(server.base_url + path)
        page.wait_for_load_state("networkidle")
    assert httpx.get(server.base_url + "/favicon.ico").status_code == 200
    assert not errors, errors
