"""The Notion provider through the real notion-client against the loopback fake Notion API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore.connectors.notion.provider import build_provider
from ctxstore.connectors.notion.sync import OVERLAP_S, PAGES_PER_CHECKPOINT
from ctxstore.ports.connector_provider import (
    Checkpoint,
    ConnectorProvider,
    CredentialsRejected,
    DeletedObject,
    KnownObject,
    ObjectLink,
    ProviderContext,
    RateLimited,
    RefreshRejected,
    ResourceUnavailable,
    SyncedObject,
    SyncEvent,
    SyncRequest,
    TokenExpired,
)
from tests.fakes.notion_api import DAY, FakeNotion
from tests.fakes.notion_blocks import para
from tests.fakes.notion_seed import Wiki, seed_wiki
from tests.support.provider_context import ContextRecorder

TOKEN = "ntn_provider_secret"


@pytest.fixture
def fake() -> Iterator[FakeNotion]:
    with FakeNotion() as server:
        server.add_token(TOKEN)
        yield server


@pytest.fixture
def wiki(fake: FakeNotion) -> Wiki:
    return seed_wiki(fake)


@pytest.fixture
def provider() -> ConnectorProvider:
    return build_provider()


@pytest.fixture
def h(fake: FakeNotion) -> ContextRecorder:
    return ContextRecorder(fake.base_url, fake.token_url, {"access_token": TOKEN})


def page_request(root: str, checkpoint: dict[str, Any] | None = None, days: float = 30) -> SyncRequest:
    return SyncRequest(root, "page", checkpoint, time.time() - days * DAY)


def ds_request(dsid: str, checkpoint: dict[str, Any] | None = None, days: float = 30) -> SyncRequest:
    return SyncRequest(dsid, "data_source", checkpoint, time.time() - days * DAY)


def run(provider: ConnectorProvider, ctx: ProviderContext, request: SyncRequest) -> list[SyncEvent]:
    return list(provider.sync(ctx, request))


def objects(events: list[SyncEvent]) -> dict[str, SyncedObject]:
    return {e.native_id: e for e in events if isinstance(e, SyncedObject)}


def last(events: list[SyncEvent]) -> Checkpoint:
    assert isinstance(events[-1], Checkpoint)
    return events[-1]


def backdate(checkpoint: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The checkpoint as if its pass had run `seconds` earlier (so edits made now fall after it)."""
    return dict(checkpoint, since=float(checkpoint["since"]) - seconds)


# ---- account, discovery ---------------------------------------------------------------------------------


def test_account_is_the_workspace_and_calls_carry_the_sdk_notion_version(
    fake: FakeNotion, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    account = provider.account(h.ctx())
    assert account.account_scope == "Acme Wiki"
    assert account.details["notion_workspace_id"] == fake.workspace_id
    [call] = fake.calls_of("users.me")
    assert call.token == TOKEN and call.version == "2025-09-03"


def test_discover_lists_shared_pages_and_data_sources_not_rows_or_private_pages(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    page = provider.discover(h.ctx())
    found = {r.resource_id: r for r in page.resources}
    assert page.next_cursor is None
    assert found[wiki.handbook].resource_type == "page" and found[wiki.handbook].metadata["top_level"] is True
    assert found[wiki.projects].resource_type == "data_source" and found[wiki.projects].name == "Projects"
    assert found[wiki.release].metadata["parent_id"] == wiki.handbook
    assert wiki.private not in found and not set(wiki.rows.values()) & set(found)
    searched = fake.calls_of("search")
    assert {c.body["filter"]["value"] for c in searched} == {"page", "data_source"}

    fake.page_size_cap = 3  # Notion's cursor is handed through when discover is paged
    first = provider.discover(h.ctx(), limit=3)
    assert first.next_cursor and first.next_cursor.startswith("page:")
    seen = [r.resource_id for r in first.resources]
    cursor: str | None = first.next_cursor
    while cursor:
        nxt = provider.discover(h.ctx(), cursor=cursor, limit=3)
        seen += [r.resource_id for r in nxt.resources]
        cursor = nxt.next_cursor
    assert sorted(seen) == sorted(found)


# ---- first sync: tree, markdown, graph ----------------------------------------------------------------------


def test_first_sync_crawls_nested_pages_into_markdown_with_parents_threads_and_links(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.page_size_cap = 4  # block children and search come in several pages
    events = run(provider, h.ctx(), page_request(wiki.handbook))
    got = objects(events)
    assert set(got) == {wiki.handbook, wiki.release, wiki.hotfix, wiki.rollback, wiki.runbook, wiki.oncall}
    assert wiki.ancient not in got, "last edited before the lookback: crawled, not ingested"
    assert wiki.cache not in got and wiki.private not in got

    hb = got[wiki.handbook]
    assert hb.parent_native_id is None and hb.thread_native_id == wiki.handbook and hb.kind == "page"
    for snippet in (
        "# Engineering Handbook",
        "**build and ship**",
        "# Principles",
        "- Small changes\n  - reviewed within a day",
        "1. Write the design doc\n2. Get a review",
        "- [x] Read the security policy",
        "- [ ] Set up the laptop",
        "```python\ndef deploy(service):",
        "> Ship small, ship often.",
        "> 🚨 Ask in #eng-help when blocked",
        "▸ On-call",
        "| Team | Owner |",
        "| Billing | Alice |",
        "$$ E = mc^2 $$",
        "[Architecture overview](https://example.com/architecture)",
        "[Release Process](https://www.notion.so/",
        "[Database: Projects]",
        "Left column: budgets",
    ):
        assert snippet in hb.text, snippet
    assert ObjectLink(wiki.runbook, "mentions") in hb.links and ObjectLink(wiki.release, "linked_to") in hb.links
    assert got[wiki.runbook].links == (ObjectLink(wiki.release, "mentions"),)
    assert got[wiki.release].parent_native_id == wiki.handbook
    assert got[wiki.rollback].parent_native_id == wiki.hotfix and got[wiki.rollback].thread_native_id == wiki.handbook
    assert got[wiki.oncall].parent_native_id == wiki.handbook, "a page inside a toggle sits in the handbook"
    assert got[wiki.release].native_fields["notion_parent_id"] == wiki.handbook
    assert got[wiki.release].url and got[wiki.release].updated_at and got[wiki.release].created_at

    children = fake.calls_of("blocks.children")
    assert any(c.query.get("start_cursor") for c in children), "block children were paged"
    assert any(c.path.endswith(f"{wiki.ancient}/children") for c in children), "old pages are crawled for sub-pages"
    cp = last(events)
    assert cp.has_more is False and cp.state["phase"] == "incremental"
    assert set(cp.state["members"]) >= set(got) | {wiki.ancient}


def test_a_first_sync_stopped_at_a_checkpoint_resumes_without_losing_or_refetching_pages(
    fake: FakeNotion, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    root = fake.add_page("Big", [para("root")], shared=True, at=time.time() - DAY)
    kids = [fake.add_page(f"Kid {i}", [para(f"kid {i}")], parent=root, at=time.time() - DAY) for i in range(25)]
    first: list[SyncEvent] = []
    for e in provider.sync(h.ctx(), page_request(root)):
        first.append(e)
        if isinstance(e, Checkpoint):
            assert e.has_more
            if sum(isinstance(x, Checkpoint) for x in first) == 2:
                break  # the service stops consuming here (a chunk's budget)
    done = objects(first)
    assert len(done) == 1 + PAGES_PER_CHECKPOINT  # the root, then a batch of its sub-pages
    cp = first[-1]
    assert isinstance(cp, Checkpoint)
    fake.clear_calls()
    rest = run(provider, h.ctx(), page_request(root, cp.state))
    again = objects(rest)
    assert not set(again) & set(done), "nothing before the checkpoint is fetched again"
    assert set(done) | set(again) == {root, *kids}
    assert last(rest).has_more is False


# ---- incremental -----------------------------------------------------------------------------------------------


def test_next_sync_reads_search_newest_first_stops_at_the_cursor_and_fetches_only_changed_pages(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    state = last(run(provider, h.ctx(), page_request(wiki.handbook))).state
    fake.clear_calls()
    idle = run(provider, h.ctx(), page_request(wiki.handbook, backdate(state, 0)))
    assert objects(idle) == {} and not fake.calls_of("blocks.children"), "nothing changed: no page fetched"

    state = backdate(last(idle).state, 3600)
    fake.clear_calls()
    fake.edit_block(fake.block_ids(wiki.hotfix, "paragraph")[0], "A hotfix now needs one reviewer and a pager.")
    new = fake.add_page("Postmortem Template", [para("What happened, impact, follow-ups.")], parent=wiki.runbook)
    fake.move(wiki.cache, wiki.release)  # moved in from outside the tree (the design docs)
    fake.move(wiki.rollback, wiki.design)  # moved out of the tree
    fake.add_page("Unrelated", [para("outside")], parent=wiki.design)
    events = run(provider, h.ctx(), page_request(wiki.handbook, state))
    got = objects(events)
    # runbook and release changed too: a new sub-page edits its parent
    assert set(got) == {wiki.hotfix, new, wiki.cache, wiki.runbook, wiki.release}
    assert "one reviewer and a pager" in got[wiki.hotfix].text
    assert got[new].parent_native_id == wiki.runbook and got[wiki.cache].parent_native_id == wiki.release
    assert [e.native_id for e in events if isinstance(e, DeletedObject)] == [wiki.rollback]
    [search] = fake.calls_of("search")
    assert search.body["sort"] == {"timestamp": "last_edited_time", "direction": "descending"}
    fetched = {c.path.split("/")[3] for c in fake.calls_of("blocks.children")}
    assert fetched == set(got), "only the changed pages' blocks were read"
    cp = last(events)
    assert cp.state["since"] >= time.time() - OVERLAP_S - 60 and wiki.rollback not in cp.state["members"]


def test_an_edit_within_the_minute_of_the_last_fetch_is_not_missed(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    state = last(run(provider, h.ctx(), page_request(wiki.handbook))).state
    fake.edit_page(wiki.runbook, append=[para("first edit")])
    state = last(run(provider, h.ctx(), page_request(wiki.handbook, state))).state
    fake.edit_page(wiki.runbook, append=[para("second edit, same minute")])  # same truncated last_edited_time
    got = objects(run(provider, h.ctx(), page_request(wiki.handbook, state)))
    assert "second edit, same minute" in got[wiki.runbook].text


# ---- data sources -----------------------------------------------------------------------------------------------


def test_data_source_rows_by_timestamp_filter_with_properties_and_incremental_edits(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.page_size_cap = 2
    events = run(provider, h.ctx(), ds_request(wiki.projects))
    got = objects(events)
    rows = wiki.rows
    assert set(got) == {wiki.projects, rows["Billing migration"], rows["Search revamp"], rows["Latency budget"]}
    ds = got[wiki.projects]
    assert ds.kind == "data_source" and ds.parent_native_id == wiki.handbook and "Status (status)" in ds.text
    billing = got[rows["Billing migration"]]
    assert billing.parent_native_id == wiki.projects and billing.thread_native_id == wiki.projects
    for snippet in ("**Status:** In progress", "**Owner:** Alice", "**Tags:** billing, database", "**Budget:** 12000"):
        assert snippet in billing.text, snippet
    assert "Move invoices to the new ledger tables." in billing.text
    assert ObjectLink(rows["Billing migration"], "related") in got[rows["Latency budget"]].links
    queries = fake.calls_of("data_sources.query")
    assert len(queries) >= 2 and queries[1].body.get("start_cursor"), "paged"
    assert queries[0].body["filter"]["timestamp"] == "last_edited_time"
    assert queries[0].body["sorts"] == [{"timestamp": "last_edited_time", "direction": "ascending"}]

    state = dict(last(events).state, since=time.time() - 3600)
    fake.clear_calls()
    fake.edit_page(rows["Search revamp"], properties={"Status": {"type": "status", "status": {"name": "Shipped"}}})
    got = objects(run(provider, h.ctx(), ds_request(wiki.projects, state)))
    assert (
        set(got) == {wiki.projects, rows["Search revamp"]} and "**Status:** Shipped" in got[rows["Search revamp"]].text
    )
    [fetched] = {c.path.split("/")[3] for c in fake.calls_of("blocks.children")}
    assert fetched == rows["Search revamp"]


# ---- deletions ------------------------------------------------------------------------------------------------------


def test_reconcile_drops_trashed_pages_and_rows_and_confirms_what_search_misses(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    known = [KnownObject(p, wiki.handbook, time.time() - DAY) for p in (wiki.handbook, wiki.release, wiki.runbook)]
    fake.trash(wiki.runbook)
    fake.clear_calls()
    present = provider.reconcile(h.ctx(), page_request(wiki.handbook), since=None, known=known)
    assert present is not None and set(present) == {wiki.handbook, wiki.release}
    assert [c.path.rsplit("/", 1)[-1] for c in fake.calls_of("pages.retrieve")] == [wiki.runbook]

    rows = [KnownObject(r, wiki.projects, time.time() - DAY) for r in wiki.rows.values()]
    fake.trash(wiki.rows["Search revamp"])
    present = provider.reconcile(h.ctx(), ds_request(wiki.projects), since=time.time() - 100 * DAY, known=rows)
    assert present is not None and set(present) == set(wiki.rows.values()) - {wiki.rows["Search revamp"]}


def test_an_unshared_root_is_a_resource_failure_not_a_credential_one(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    state = last(run(provider, h.ctx(), page_request(wiki.design))).state
    fake.unshare(wiki.design)
    with pytest.raises(ResourceUnavailable, match="object_not_found"):
        run(provider, h.ctx(), page_request(wiki.design, state))
    with pytest.raises(ResourceUnavailable):
        provider.probe(h.ctx(), page_request(wiki.design))
    fake.unshare(wiki.handbook)  # the data source inside it goes with it
    with pytest.raises(ResourceUnavailable):
        run(provider, h.ctx(), ds_request(wiki.projects))


# ---- errors, rate limits --------------------------------------------------------------------------------------------


def test_rejected_and_restricted_tokens_and_expired_oauth_tokens(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    with pytest.raises(CredentialsRejected, match="unauthorized"):
        provider.account(h.ctx({"access_token": "ntn_not_issued"}))
    fake.add_token("ntn_limited")
    fake.tokens["ntn_limited"].restricted = True
    with pytest.raises(CredentialsRejected, match="restricted_resource"):
        run(provider, h.ctx({"access_token": "ntn_limited"}), page_request(wiki.handbook))
    fake.add_token("ntn_oauth_old", expires_in=-1)
    oauth = {"access_token": "ntn_oauth_old", "refresh_token": "r", "client_id": "c", "client_secret": "s"}
    with pytest.raises(TokenExpired):
        run(provider, h.ctx(oauth, auth_type="oauth"), page_request(wiki.handbook))


def test_429_is_waited_out_through_the_service_sleep_and_a_long_one_is_rate_limited(
    fake: FakeNotion, wiki: Wiki, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.fail("blocks.children", status=429, retry_after=2, times=2)
    got = objects(run(provider, h.ctx(), page_request(wiki.design)))
    assert set(got) == {wiki.design, wiki.cache} and h.sleeps == [2.0, 2.0]
    fake.fail("search", status=429, retry_after=120)
    with pytest.raises(RateLimited) as info:
        provider.discover(h.ctx(max_wait_s=60))
    assert info.value.retry_after_s == 120
    fake.fail("pages.retrieve", status=503, code="service_unavailable", times=1)
    assert provider.probe(h.ctx(), page_request(wiki.design)) is True  # retried once after 1 s


# ---- OAuth --------------------------------------------------------------------------------------------------------


def test_refresh_rotates_both_tokens_with_basic_auth_and_a_spent_refresh_token_is_rejected(
    fake: FakeNotion, h: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.add_oauth_client("client-n", "secret-n")
    first = fake.issue_refresh_token("client-n")
    creds = {"access_token": "ntn_x", "refresh_token": first, "client_id": "client-n", "client_secret": "secret-n"}
    rotated = provider.refresh(h.ctx(creds, auth_type="oauth"))
    assert rotated["access_token"] != "ntn_x" and rotated["refresh_token"] != first
    assert rotated["client_secret"] == "secret-n" and rotated["expires_at"] > time.time() + 3000
    [call] = fake.calls_of("oauth.token")
    assert call.body == {"grant_type": "refresh_token", "refresh_token": first}
    assert call.basic == ("client-n", "secret-n") and call.token is None
    assert provider.account(h.ctx(rotated, auth_type="oauth")).account_scope == "Acme Wiki"
    with pytest.raises(RefreshRejected, match="invalid_grant"):
        provider.refresh(h.ctx(creds, auth_type="oauth"))  # the old refresh token was single use
    with pytest.raises(CredentialsRejected, match="invalid_client"):
        provider.refresh(h.ctx(dict(rotated, client_secret="wrong"), auth_type="oauth"))
    fake.access_token_lifetime_s = None
    again = provider.refresh(h.ctx(rotated, auth_type="oauth"))
    assert "expires_at" not in again, "no expires_in: refreshed on the next 401 instead"


def test_credential_validation(provider: ConnectorProvider) -> None:
    assert provider.validate_credentials("api_token", {"access_token": " ntn_a "}) == {"access_token": "ntn_a"}
    with pytest.raises(ValueError, match="access_token is required"):
        provider.validate_credentials("api_token", {})
    with pytest.raises(ValueError, match="not a field"):
        provider.validate_credentials("api_token", {"access_token": "a", "refresh_token": "b"})
    with pytest.raises(ValueError, match="client_secret is required"):
        provider.validate_credentials("oauth", {"access_token": "a", "refresh_token": "b", "client_id": "c"})
    full = {"access_token": "a", "refresh_token": "b", "client_id": "c", "client_secret": "d", "expires_at": 5}
    assert provider.validate_credentials("oauth", full)["expires_at"] == 5.0
