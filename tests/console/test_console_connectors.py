"""The Connectors pages in Debian's Chromium against a real `ctxstore serve` on the fake Slack Web API.

The tests run in order on one page and build on each other: create a Slack connector (a refused token
first), discover, configure a channel (an empty one gives a warning), watch the first sync finish and the
messages appear on the documents page, sync now (twice: the second is the 409 "already running"), change
the interval, revoke the token at the fake and see sync_blocked, fix it with new credentials, delete with a
typed confirmation. Every page passes axe-core and leaves a screenshot; no token is in any page, URL or log.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import INLINE_MAX_BYTES, Recorder, check_page, sign_in
from tests.fakes.slack_api import FakeSlack
from tests.support.connectors import ready_database
from tests.support.server import ServerProcess

FIRST_TOKEN = "xoxb-console-first-secret-7f3a"
SECOND_TOKEN = "xoxb-console-second-secret-91c2"
REFUSED_TOKEN = "xoxb-console-never-issued-5d0e"
HOUR = 3600.0
SYNC_TIMEOUT_MS = 90_000
NOTICE = "p.notice[role=status]"  # what the last action did (the state region has notices of its own)
PROBLEM = "div.alert[role=alert]"  # a refusal, in plain words with the code and request id


@pytest.fixture(scope="module", autouse=True)
def workspace(server: ServerProcess, admin_key: str, slack: FakeSlack) -> None:
    """A Slack workspace with a busy channel (a thread too), an empty one and one the app is not in."""
    slack.add_token(FIRST_TOKEN)
    slack.add_channel("C0GENERAL", "general")
    root = slack.post("C0GENERAL", "Release 4.2 ships Thursday after the billing migration", at=time.time() - 3 * HOUR)
    slack.post("C0GENERAL", "The migration dry run passed on staging", thread_ts=root, at=time.time() - 2 * HOUR)
    slack.post("C0GENERAL", "Incident review moved to Friday morning", at=time.time() - HOUR)
    slack.add_channel("C0QUIET", "quiet")
    slack.add_channel("C0OUTSIDE", "outside", is_member=False)
    with server.client(admin_key) as api:
        ready_database(api, "acme")


def _state(page: Page) -> Any:
    return page.locator("#connector-state")


def test_the_connectors_page_starts_empty(page: Page, server: ServerProcess, admin_key: str) -> None:
    sign_in(page, server.base_url, admin_key)
    page.click("nav >> text=Connectors")
    expect(page.locator("h1")).to_have_text("Connectors")
    expect(page.locator("#connector-rows .empty-state")).to_contain_text("No connectors yet")
    # The five providers of the interface all run here: a tile each, none greyed out.
    expect(page.locator("a.tile")).to_have_count(5)
    expect(page.locator(".tile.off")).to_have_count(0)
    check_page(page, "connectors-empty")


def test_create_a_slack_connector_from_its_credential_schema(page: Page, state: dict[str, Any]) -> None:
    page.click(".tile:has-text('Slack')")
    expect(page.locator("h1")).to_have_text("New Slack connector")
    token = page.locator("#cred-access_token")
    expect(token).to_have_attribute("type", "password")
    # The other auth type renders its own schema (refresh token, client id and secret).
    page.click(".segmented >> text=OAuth with token rotation")
    expect(page.locator("#cred-refresh_token")).to_have_attribute("type", "password")
    expect(page.locator("#cred-client_id")).to_have_attribute("type", "text")
    page.click(".segmented >> text=API token")
    check_page(page, "connector-new")
    # A token Slack refuses: nothing is created, the form comes back without it.
    page.fill("#cred-access_token", REFUSED_TOKEN)
    page.fill("#cn-name", "Team Slack")
    page.click("text=Check credentials and create")
    expect(page.locator(PROBLEM)).to_contain_text("rejected the credentials")
    expect(page.locator("#cred-access_token")).to_have_value("")
    expect(page.locator("#cn-name")).to_have_value("Team Slack")
    page.fill("#cred-access_token", FIRST_TOKEN)
    page.click("text=Check credentials and create")
    expect(page.locator("h1")).to_have_text("Team Slack")
    expect(page.locator(NOTICE)).to_contain_text("Connector created")
    expect(_state(page)).to_have_attribute("data-lifecycle", "pending_setup")
    state["url"] = page.url.split("?")[0]
    state["id"] = state["url"].rsplit("/", 1)[1]


def test_discover_and_configure_a_channel_then_watch_the_first_sync(page: Page, state: dict[str, Any]) -> None:
    page.click("text=Discover and choose resources")
    expect(page.locator("h1")).to_have_text("Choose what to sync")
    expect(page.locator("tr[data-resource]")).to_have_count(3)
    expect(page.locator("tr[data-resource='C0OUTSIDE']")).to_contain_text("not in this channel")
    check_page(page, "connector-discover")
    page.check("tr[data-resource='C0GENERAL'] input[type=checkbox]")
    page.check("tr[data-resource='C0QUIET'] input[type=checkbox]")
    page.fill("#lookback", "7")
    page.click("text=Save selection and sync")
    expect(page.locator("[data-configured]")).to_contain_text("2 resource(s) configured")
    expect(page.locator("[data-warnings]")).to_contain_text("'quiet' (C0QUIET) produced nothing")
    # The state follows the first sync without a reload.
    general = _state(page).locator("tr[data-resource='C0GENERAL']")
    expect(general.locator("[data-first-sync]")).to_contain_text("done", timeout=SYNC_TIMEOUT_MS)
    expect(general.locator("[data-cursor]")).to_have_text(re.compile(r"^\d+\.\d+$"))  # Slack's ts of the newest
    expect(_state(page).locator("[data-cycles]")).to_have_text("1", timeout=SYNC_TIMEOUT_MS)
    expect(_state(page).locator("[data-dispatched]")).to_have_text("3")
    expect(_state(page)).to_contain_text("configure, done")
    check_page(page, "connector")


def test_the_synced_messages_appear_on_the_documents_page(
    page: Page, state: dict[str, Any], recorder: Recorder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    page.click("text=Synced items")
    rows = page.locator("#item-rows tbody tr")
    expect(rows).to_have_count(3)
    for text in ("Release 4.2 ships", "migration dry run", "Incident review"):
        expect(rows.filter(has_text=text)).to_contain_text("completed", timeout=SYNC_TIMEOUT_MS)
    # Beside them, a small file uploaded the ordinary way: in the console's own request.
    note = tmp_path_factory.mktemp("upload") / "release-notes.md"
    note.write_text("# Release notes\n\nRelease 4.2 moves invoices to the new billing service.\n")
    page.set_input_files("#file-input", str(note))
    upload = page.locator("[data-upload-list] li").first
    expect(upload.locator(".status")).to_have_text("completed", timeout=SYNC_TIMEOUT_MS)
    assert note.stat().st_size <= INLINE_MAX_BYTES and upload.get_attribute("data-by-reference") is None
    assert any(u.endswith("/console/databases/acme/upload") for u in recorder.urls)
    page.goto(state["url"])


def test_sync_now_and_a_second_sync_now_while_it_runs(page: Page, slack: FakeSlack, state: dict[str, Any]) -> None:
    slack.post("C0GENERAL", "Budget review notes are in the shared folder")
    slack.delay_s = 1.0  # a slow provider keeps this sync running while the second click comes
    try:
        page.click("button:text-is('Sync now')")
        expect(page.locator(NOTICE)).to_contain_text("Sync queued")
        page.click("button:text-is('Sync now')")
        alert = page.locator(PROBLEM)
        expect(alert).to_contain_text("The sync was not started.")
        expect(alert).to_contain_text("already queued or running")
        expect(alert).to_contain_text("CONFLICT")
        check_page(page, "connector-sync-running")
    finally:
        slack.delay_s = 0.0
    expect(_state(page).locator("[data-cycles]")).to_have_text("2", timeout=SYNC_TIMEOUT_MS)
    expect(_state(page).locator("[data-dispatched]")).to_have_text("4")


def test_the_interval_shows_its_bounds_and_saves(page: Page) -> None:
    expect(page.locator("#iv-hint")).to_contain_text("604800 s")
    page.fill("#iv", "600")
    page.click("text=Save interval")
    expect(page.locator(NOTICE)).to_contain_text("Sync interval saved")
    expect(page.locator("#interval")).to_contain_text("Every 10 min")


def test_a_revoked_token_shows_sync_blocked_and_new_credentials_fix_it(
    page: Page, server: ServerProcess, slack: FakeSlack, state: dict[str, Any]
) -> None:
    slack.revoke(FIRST_TOKEN)
    page.click("button:text-is('Sync now')")
    expect(page.locator(NOTICE)).to_contain_text("Sync queued")
    expect(_state(page).locator("[data-badge=sync_blocked]")).to_be_visible(timeout=SYNC_TIMEOUT_MS)
    expect(_state(page)).to_have_attribute("data-lifecycle", "reconnect")
    expect(_state(page).locator("[data-reconnect]")).to_contain_text("token_revoked")
    page.click("button:text-is('Sync now')")  # the scheduler skips it, and so does sync now
    expect(page.locator(PROBLEM)).to_contain_text("sync_blocked")
    check_page(page, "connector-blocked")
    page.click("nav >> text=Connectors")
    row = page.locator(f"tr[data-connector='{state['id']}']")
    expect(row.locator("[data-badge=sync_blocked]")).to_be_visible()
    expect(row).to_contain_text("paused")
    check_page(page, "connectors")
    row.locator("a").click()
    slack.add_token(SECOND_TOKEN)
    slack.post("C0GENERAL", "Onboarding checklist updated for new hires")
    page.fill("#upd-access_token", SECOND_TOKEN)
    page.click("text=Check and save credentials")
    expect(page.locator(NOTICE)).to_contain_text("Credentials checked with the provider and saved")
    expect(page.locator("#upd-access_token")).to_have_value("")
    expect(_state(page).locator("[data-badge=sync_blocked]")).to_have_count(0)
    expect(_state(page).locator("[data-cycles]")).to_have_text("3", timeout=SYNC_TIMEOUT_MS)
    expect(_state(page)).not_to_have_attribute("data-lifecycle", "reconnect")
    expect(_state(page).locator("[data-dispatched]")).to_have_text("5")
    assert any(c.token == SECOND_TOKEN for c in slack.calls), "the new token was used by the sync"


def test_delete_needs_the_name_typed_back(page: Page, state: dict[str, Any]) -> None:
    button = page.locator("button:text-is('Delete connector')")
    page.fill("#confirm-connector", "Team")
    expect(button).to_be_disabled()
    page.fill("#confirm-connector", "Team Slack")
    button.click()
    expect(page.locator(NOTICE)).to_contain_text("Team Slack")
    expect(page.locator("#connector-rows .empty-state")).to_be_visible()


def test_no_token_in_any_page_url_or_log_line(server: ServerProcess, recorder: Recorder, slack: FakeSlack) -> None:
    assert recorder.html and any("/console/connectors" in url for url, _ in recorder.html)
    used = {c.token for c in slack.calls}
    assert {FIRST_TOKEN, SECOND_TOKEN, REFUSED_TOKEN} <= used, "the tokens did reach the provider"
    for token in (FIRST_TOKEN, SECOND_TOKEN, REFUSED_TOKEN):
        assert not [u for u in recorder.urls if token in u], token
        assert not [u for u, body in recorder.html if token in body], token
        assert not [line for line in server.lines if token in line], token
    with httpx.Client(base_url=server.base_url) as anon:  # nor is a page reachable without a session
        assert anon.get("/console/connectors", follow_redirects=False).status_code == 303
