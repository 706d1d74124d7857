"""The console's real flows in Debian's Chromium against a real `ctxstore serve` (issue 17).

One server and one browser for the module; the tests run in order and build on each other:
sign in, create a key and use it over HTTP, create a database, upload a PDF and watch it reach
`completed`, query it, open its graph, run BYOG queries, register a webhook, revoke the key and
see its session end. Every page passes axe-core (no serious or critical violation) and leaves a
screenshot in docs/console/.
"""

from __future__ import annotations

import http.server
import re
import threading
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.console.browser import INLINE_MAX_BYTES, KEY_RE, Recorder, check_page, new_context, sign_in
from tests.support.server import ServerProcess

PDF = Path(__file__).resolve().parents[3] / "shared" / "data" / "parser_docs" / "markitdown" / "test.pdf"


class Receiver:
    """A loopback webhook endpoint: refuses (500) until told to accept."""

    def __init__(self) -> None:
        self.accept = False
        self.bodies: list[bytes] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
                self.send_response(200 if outer.accept else 500)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


def test_sign_in_with_the_admin_key(page: Page, server: ServerProcess, admin_key: str) -> None:
    page.goto(server.base_url + "/console/")
    expect(page.locator("h1")).to_have_text("Sign in")
    check_page(page, "sign-in")
    page.fill("#api_key", "csk_notakeynotakey_" + "x" * 40)
    page.click("button[type=submit]")
    expect(page.locator(".alert")).to_contain_text("not accepted")
    page.fill("#api_key", admin_key)
    page.click("button[type=submit]")
    expect(page).to_have_url(server.base_url + "/console/databases")
    expect(page.locator(".empty-state")).to_contain_text("No databases yet")
    cookie = next(c for c in page.context.cookies() if c["name"] == "ctxstore_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert admin_key not in cookie["value"]
    check_page(page, "databases-empty")


def test_create_a_key_and_use_it_over_http(page: Page, server: ServerProcess, state: dict[str, Any]) -> None:
    page.click("nav >> text=API keys")
    page.select_option("#expires_in", "30d")
    page.click("text=Create key")
    new_key = page.input_value("#new-key")
    assert KEY_RE.fullmatch(new_key)
    prefix = new_key.split("_")[1]
    expect(page.locator("tbody")).to_contain_text(prefix)
    page.click("[data-copy='#new-key']")
    assert page.evaluate("() => navigator.clipboard.readText()") == new_key
    check_page(page, "keys-created")
    with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {new_key}"}) as api:
        r = api.get("/databases")
        assert r.status_code == 200, r.text
    keys_before = page.locator("tbody tr").count()
    page.reload()  # posts the form again: its one-time token creates nothing the second time
    expect(page.locator(".alert")).to_contain_text("no second key was created")
    expect(page.locator(".alert")).to_contain_text(prefix)
    expect(page.locator("tbody tr")).to_have_count(keys_before)
    assert new_key not in page.content()
    page.goto(server.base_url + "/console/keys")  # the secret is shown once: the page shows the prefix only
    assert new_key not in page.content()
    row = page.locator("tr", has_text=prefix)
    expect(row).to_contain_text("active")
    expect(row).not_to_contain_text("Not yet")  # last used: the HTTP call above
    state["key"], state["prefix"] = new_key, prefix


def test_create_a_database_and_watch_it_become_ready(page: Page, server: ServerProcess) -> None:
    page.click("nav >> text=Databases")
    page.fill("#new-db", "acme")
    page.click("text=Create database")
    expect(page).to_have_url(server.base_url + "/console/databases/acme?created=1")
    expect(page.locator("#readiness")).to_contain_text("All stores are provisioned", timeout=30_000)
    expect(page.locator(".flags li.on")).to_have_count(4)
    page.fill("#f-name", "department")
    page.click("text=Add field")
    expect(page.locator("#schema tbody")).to_contain_text("department")
    check_page(page, "database-overview")


def test_upload_a_pdf_and_watch_it_reach_completed(
    page: Page, server: ServerProcess, state: dict[str, Any], recorder: Recorder
) -> None:
    page.click("nav >> text=Documents & memories")
    expect(page.locator(".empty-state")).to_contain_text("Nothing here yet")
    page.set_input_files("#file-input", str(PDF))
    row = page.locator("[data-upload-list] li").first
    expect(row.locator(".status")).to_have_text("completed", timeout=180_000)
    assert row.locator("progress").evaluate("el => el.value") == 100
    state["item"] = row.get_attribute("data-item-id")
    # Over the inline limit: a grant, the file to this server's /blobs/{token} (S3 on AWS), then by reference.
    assert PDF.stat().st_size > INLINE_MAX_BYTES and row.get_attribute("data-by-reference") == "1"
    asked = [u.split("/console", 1)[-1] for u in recorder.urls]
    assert "/databases/acme/uploads" in asked and "/databases/acme/upload-ref" in asked
    assert any("/blobs/" in u and "/console" not in u for u in recorder.urls)
    assert "/databases/acme/upload" not in asked
    expect(page.locator("#item-rows")).to_contain_text("test.pdf")  # the list follows without a reload
    check_page(page, "upload-completed")
    page.reload()
    expect(page.locator("#item-rows tbody tr")).to_have_count(1)
    expect(page.locator("#item-rows")).to_contain_text("completed")
    # Filters: by status, and an empty result says what to do.
    page.select_option("#flt-status", "errored")
    page.click("text=Apply filters")
    expect(page.locator("#item-rows .empty-state")).to_contain_text("No item matches these filters")
    page.select_option("#flt-status", "")
    page.click("text=Apply filters")
    check_page(page, "items")


def test_add_an_app_item_and_a_memory(page: Page) -> None:
    page.click("summary:has-text('Add an app item')")
    page.fill("#app-title", "Support handbook")
    page.fill("#app-text", "Ada Lovelace works at Acme Corporation. Acme Corporation acquired Globex in 2021.")
    page.fill("#app-amd", '{"team": "support"}')
    page.click("form[action*='app-items'] button[type=submit]")
    expect(page.locator(".notice")).to_contain_text("Accepted")
    expect(page.locator("#item-rows")).to_contain_text("Support handbook")
    expect(page.locator("#item-rows tbody tr", has_text="Support handbook")).to_contain_text(
        "completed", timeout=60_000
    )
    page.click("summary:has-text('Add a memory')")
    page.check("input[name=shape][value=pairs]")
    page.fill("#mem-text", "User: I prefer window seats on long flights.\nAssistant: Noted, window seats it is.")
    page.fill("#mem-user", "Sam")
    page.click("form[action*='memories'] button[type=submit]")
    expect(page.locator("h2", has_text="Memories in")).to_be_visible()
    expect(page.locator("#item-rows tbody tr").first).to_contain_text("completed", timeout=60_000)


def test_inspect_the_pdf_and_edit_its_metadata(page: Page, server: ServerProcess, state: dict[str, Any]) -> None:
    page.goto(server.base_url + "/console/databases/acme/items")
    page.click("#item-rows a:has-text('test.pdf')")
    expect(page.locator("h1")).to_have_text("test.pdf")
    expect(page.locator(".chunk").first).to_contain_text("multi-agent")
    page.fill("#amd", '{"reviewed": "yes"}')
    page.fill("#md", '{"department": "research"}')
    page.click("text=Save metadata")
    expect(page.locator(".notice")).to_contain_text("Metadata saved")
    expect(page.locator("#amd")).to_contain_text('"reviewed": "yes"')
    check_page(page, "item")


def test_query_the_pdf_in_the_playground(page: Page, server: ServerProcess, state: dict[str, Any]) -> None:
    page.goto(server.base_url + "/console/databases/acme/playground")
    check_page(page, "playground-empty")
    page.fill("#q", "How do multi-agent conversations help LLM applications?")
    page.select_option("#q-mode", "thinking")
    page.click("summary:has-text('More options')")
    page.fill("#q-filters", '{"department": "research"}')
    page.click("text=Run query")
    results = page.locator("#results")
    expect(results.locator("[data-route]")).to_have_text("thinking")
    expect(results.locator(".chunk.hit").first).to_contain_text("test.pdf")
    assert results.locator(".chunk.hit mark").count() > 0
    expect(results.locator("[data-latency]")).to_contain_text("ms")
    page.click("summary:has-text('Copy as curl')")
    curl = page.inner_text("#snippet-curl")
    assert '"department": "research"' in curl and "$CTXSTORE_API_KEY" in curl
    page.click("[data-copy='#snippet-python']")
    assert "httpx.post(" in page.evaluate("() => navigator.clipboard.readText()")
    check_page(page, "playground")
    # auto mode reports the route it took
    page.select_option("#q-mode", "auto")
    page.click("text=Run query")
    expect(results.locator(".plan")).to_contain_text("auto:")


def test_open_the_graph_of_the_collection_and_of_the_item(
    page: Page, server: ServerProcess, state: dict[str, Any]
) -> None:
    page.goto(server.base_url + "/console/databases/acme/graph")
    graph = page.locator(".big-graph")
    expect(graph).to_have_attribute("data-graph-ready", re.compile(r"^[1-9]\d*$"), timeout=30_000)
    expect(page.locator("[data-graph-summary]")).to_contain_text("relation groups")
    box = graph.bounding_box()
    assert box is not None
    zoom = page.evaluate("() => document.querySelector('.big-graph').ctxGraph.zoom()")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 400)  # zoom out (a small graph is fitted at the zoom cap already)
    page.wait_for_function(f"() => document.querySelector('.big-graph').ctxGraph.zoom() < {zoom}")
    page.click("[data-graph-fit]")
    check_page(page, "graph-relations")
    page.click("summary:has-text('Relations as a list')")
    page.locator("[data-graph-list] a").first.click()  # click-through to the item behind an edge
    expect(page.locator("h1")).to_have_text("Support handbook")
    # The PDF's own graph: the item and the entities it mentions, then its item subgraph.
    page.goto(server.base_url + "/console/databases/acme/items")
    page.click("#item-rows a:has-text('test.pdf')")
    page.click("text=Relations graph")
    expect(page.locator(".big-graph")).to_have_attribute("data-graph-ready", re.compile(r"^([2-9]|\d\d+)$"))
    expect(page.locator("[data-graph-summary]")).to_contain_text("mentioned entities")
    check_page(page, "graph-item")
    page.goto(page.url.replace("view=relations", "view=subgraph"))
    expect(page.locator(".big-graph")).to_have_attribute("data-graph-ready", "1", timeout=30_000)
    expect(page.locator("[data-graph-summary]")).to_contain_text("1 items")
    page.evaluate("() => document.querySelector('.big-graph').ctxGraph.nodes()[0].emit('tap')")
    expect(page.locator("h1")).to_have_text("test.pdf")


def test_byog_queries_show_rows_graphs_and_rejections(page: Page, server: ServerProcess) -> None:
    page.click("nav >> text=Graph databases (BYOG)")
    expect(page.locator(".empty-state")).to_contain_text("No graph databases yet")
    page.fill("#gdb-name", "people")
    page.click("button:text-is('Create')")
    expect(page.locator("h1")).to_have_text("people")
    page.click("button:has-text('Run')")  # the example MERGE with $name
    results = page.locator("#byog-results")
    expect(results.locator("h2").first).to_have_text("1 row")
    expect(results.locator("table")).to_contain_text("Ada")
    expect(results.locator(".small-graph")).to_have_attribute("data-graph-ready", "2")
    expect(page.locator("#byog-collections")).to_contain_text("main")  # created by that first write
    check_page(page, "byog")
    page.fill("#cy-query", "CALL db.labels()")
    page.fill("#cy-params", "")
    page.locator("#cy-query").press("Control+Enter")
    expect(results.locator("[data-rejection]")).to_contain_text("procedure")
    page.fill("#cy-query", "MATCH (n) RETURN n.name AS name ORDER BY name")
    page.locator("#cy-query").press("Control+Enter")
    expect(results.locator("table")).to_contain_text("Acme")


def test_webhook_register_refusal_test_history_retry_rotate(
    page: Page, server: ServerProcess, state: dict[str, Any]
) -> None:
    receiver = Receiver()
    try:
        page.click("nav >> text=Webhooks")
        page.fill("#wh-url", "http://169.254.169.254/latest")
        page.click("text=Register endpoint")
        expect(page.locator(".alert")).to_contain_text("169.254.169.254")
        page.fill("#wh-url", receiver.url)
        page.click("text=Register endpoint")
        expect(page.locator("#new-secret")).to_have_value(re.compile(r"^whsec_.+"))
        page.click("text=Send a test event")
        expect(page.locator("p[role=status]", has_text="Test event")).to_contain_text("not delivered")
        # A change of status is delivered; the receiver refuses it, so it fails for good (1 attempt here).
        page.goto(server.base_url + "/console/databases/acme/items?type=memory")
        page.click("summary:has-text('Add a memory')")
        page.fill("#mem-text", "Sam likes aisle seats on short hops.")
        page.click("form[action*='memories'] button[type=submit]")
        page.goto(server.base_url + "/console/webhooks")
        retry = page.locator("#deliveries button:has-text('Retry')").first
        expect(retry).to_be_visible(timeout=30_000)
        receiver.accept = True
        retry.click()
        expect(page.locator(".notice")).to_contain_text("queued again")
        expect(page.locator("#deliveries .status-completed").first).to_be_visible(timeout=30_000)
        page.click("text=Send a test event")
        expect(page.locator("p[role=status]", has_text="Test event")).to_contain_text("delivered (HTTP 200)")
        page.click("text=Rotate secret")
        page.click("dialog >> button:has-text('Rotate secret')")
        expect(page.locator("#secret-title")).to_be_visible()
        check_page(page, "webhooks")
    finally:
        receiver.close()


def test_revoke_the_key_and_its_session_ends(
    page: Page, browser: Browser, server: ServerProcess, state: dict[str, Any]
) -> None:
    other = new_context(browser)
    try:
        theirs = other.new_page()
        sign_in(theirs, server.base_url, state["key"])
        theirs.goto(server.base_url + "/console/keys")
        expect(theirs.locator("tr", has_text=state["prefix"])).to_contain_text("this session")
        page.goto(server.base_url + "/console/keys")
        row = page.locator("tr", has_text=state["prefix"])
        row.locator("button:has-text('Revoke')").click()
        expect(page.locator("dialog")).to_contain_text(state["prefix"])
        check_page(page, "keys-revoke-confirm")
        page.click("dialog >> button:has-text('Revoke key')")
        expect(page.locator(".notice")).to_contain_text("is revoked")
        expect(page.locator("tr", has_text=state["prefix"])).to_contain_text("revoked")
        theirs.reload()
        expect(theirs).to_have_url(server.base_url + "/console/sign-in?ended=key")
        expect(theirs.locator(".notice")).to_contain_text("revoked")
        theirs.goto(server.base_url + "/console/databases")
        expect(theirs.locator("h1")).to_have_text("Sign in")
        with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {state['key']}"}) as api:
            assert api.get("/databases").status_code == 401
    finally:
        other.close()


def test_errors_are_plain_words_with_the_request_id(page: Page, server: ServerProcess) -> None:
    page.goto(server.base_url + "/console/databases/nope")
    expect(page.locator("h1")).to_have_text("That database does not exist, or this key cannot see it.")
    expect(page.locator(".problem")).to_contain_text("request id")
    check_page(page, "error")


def test_no_key_in_any_page_url_or_log_line(
    server: ServerProcess, admin_key: str, recorder: Recorder, state: dict[str, Any]
) -> None:
    assert recorder.html, "the flows recorded no page"
    for url in recorder.urls:
        assert not KEY_RE.search(url), url
    shown = [url for url, body in recorder.html if state["key"] in body]
    assert len(shown) == 1 and shown[0].endswith("/console/keys"), shown  # the one creation response
    for url, body in recorder.html:
        assert admin_key not in body, url
    printed = [line for line in server.lines if KEY_RE.search(line)]
    assert printed == [admin_key], printed  # only the first start's own print of the first key
