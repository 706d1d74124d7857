"""The Linear provider through its GraphQL client (httpx) against the loopback fake Linear API (graphql-core)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from graphql import build_schema, parse, validate

from ctxstore.connectors.linear import provider as linear_module
from ctxstore.connectors.linear import sync as linear_sync
from ctxstore.connectors.linear.info import authorization
from ctxstore.connectors.linear.mapping import comment_native_id, issue_native_id
from ctxstore.connectors.linear.provider import build_provider
from ctxstore.connectors.linear.sync import OVERLAP_S, iso_ms
from ctxstore.ports.connector_provider import (
    Checkpoint,
    ConnectorProvider,
    CredentialsRejected,
    DeletedObject,
    KnownObject,
    ObjectFailure,
    RateLimited,
    RefreshRejected,
    ResourceUnavailable,
    SyncedObject,
    SyncEvent,
    SyncRequest,
    TokenExpired,
    TransientProviderError,
)
from tests.fakes.linear_api import SCHEMA_SDL, FakeLinear
from tests.fakes.linear_seed import Seeded, seed_workspace
from tests.support.provider_context import ContextRecorder

DAY = 86400.0


@pytest.fixture
def fake() -> Iterator[FakeLinear]:
    with FakeLinear() as server:
        yield server


@pytest.fixture
def seeded(fake: FakeLinear) -> Seeded:
    return seed_workspace(fake)


@pytest.fixture
def provider() -> ConnectorProvider:
    return build_provider()


@pytest.fixture
def harness(fake: FakeLinear) -> ContextRecorder:
    """Sleeps are recorded, not slept (an injected limit is one-shot)."""
    return ContextRecorder(fake.base_url, fake.token_url)


def request(team: str, checkpoint: dict[str, Any] | None, *, lookback_days: float = 30, **kw: Any) -> SyncRequest:
    return SyncRequest(team, "linear_team", checkpoint, time.time() - lookback_days * DAY, **kw)


def by_id(events: list[SyncEvent]) -> dict[str, SyncedObject]:
    return {e.native_id: e for e in events if isinstance(e, SyncedObject)}


def deleted(events: list[SyncEvent]) -> set[str]:
    return {e.native_id for e in events if isinstance(e, DeletedObject)}


def last_state(events: list[SyncEvent]) -> dict[str, Any]:
    assert isinstance(events[-1], Checkpoint) and not events[-1].has_more, "a sync ends caught up"
    return events[-1].state


# ---- account, header, discovery -------------------------------------------------------------------------


def test_account_is_the_workspace_and_a_personal_key_goes_bare(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    account = provider.account(harness.ctx({"access_token": seeded.key}))
    assert (account.account_scope, account.account_name) == ("acme", "Acme Corp")
    assert account.details["linear_workspace"] == "acme"
    [call] = fake.calls_of("Account")
    assert call.authorization == seeded.key, "Linear: personal API keys without 'Bearer'"
    # OAuth tokens go as Bearer; the fake refuses a personal key sent as Bearer, as the header rule says.
    assert authorization("oauth", {"access_token": "lin_oauth_x"}) == "Bearer lin_oauth_x"
    with pytest.raises(CredentialsRejected, match="Authentication required"):
        provider.account(harness.ctx({"access_token": "Bearer " + seeded.key}))


def test_discover_lists_visible_teams_and_pages_with_the_end_cursor(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ctx = harness.ctx({"access_token": seeded.key})
    page = provider.discover(ctx)
    teams = {r.resource_id: r for r in page.resources}
    assert set(teams) == {seeded.team, seeded.other_team}, "a private team is visible to its members only"
    eng = teams[seeded.team]
    assert eng.resource_type == "linear_team" and eng.name == "Engineering"
    assert eng.metadata["key"] == "ENG" and eng.metadata["private"] is False and eng.metadata["issue_count"] > 40
    first = provider.discover(ctx, limit=1)
    assert len(first.resources) == 1 and first.next_cursor
    rest = provider.discover(ctx, cursor=first.next_cursor, limit=1)
    assert {first.resources[0].resource_id, rest.resources[0].resource_id} == set(teams) and rest.next_cursor is None
    assert fake.calls_of("Teams")[-1].variables["after"] == first.next_cursor


def test_every_query_document_is_valid_against_linears_schema() -> None:
    schema = build_schema(SCHEMA_SDL)
    documents = [
        linear_sync.TEAM_ISSUES,
        linear_sync.TEAM_COMMENTS,
        linear_sync.ISSUE_COMMENTS,
        linear_sync.EXISTING_ISSUES,
        linear_sync.EXISTING_COMMENTS,
        linear_sync.PROBE,
        linear_module.ACCOUNT,
        linear_module.TEAMS,
    ]
    for document in documents:
        assert validate(schema, parse(document)) == [], document


# ---- first sync: mapping and graph ------------------------------------------------------------------------


def test_first_sync_maps_issues_sub_issues_relations_and_comment_threads(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.page_cap = 10  # pagination across pages
    events = list(provider.sync(harness.ctx({"access_token": seeded.key}), request(seeded.team, None)))
    objects, i, c = by_id(events), seeded.issues, seeded.comments

    epic, child, grandchild = (objects[issue_native_id(i[k])] for k in ("epic", "child", "grandchild"))
    assert epic.kind == "issue" and epic.title == "ENG-1 Billing service migration"
    assert "Move **billing** to the new cluster." in epic.text and "priority High" in epic.text
    assert epic.url == "https://linear.app/acme/issue/ENG-1" and epic.thread_native_id == epic.native_id
    assert epic.native_fields["linear_identifier"] == "ENG-1" and epic.native_fields["linear_number"] == 1
    assert epic.native_fields["linear_state_type"] == "started" and epic.native_fields["linear_labels"] == ["migration"]
    assert child.parent_native_id == epic.native_id and grandchild.parent_native_id == child.native_id
    assert ("child_of", epic.native_id) in {(x.relation, x.native_id) for x in child.links}

    def links(key: str) -> set[tuple[str, str]]:
        return {(x.relation, x.native_id) for x in objects[issue_native_id(i[key])].links}

    assert ("blocked_by", issue_native_id(i["blocker"])) in links("epic")
    assert ("blocks", issue_native_id(i["epic"])) in links("blocker")
    assert ("duplicate", issue_native_id(i["child"])) in links("dupe")
    assert ("duplicated_by", issue_native_id(i["dupe"])) in links("child")
    assert ("related", issue_native_id(i["related"])) in links("epic"), "related across teams"
    assert ("similar", issue_native_id(i["child"])) in links("similar")
    assert ("similar", issue_native_id(i["similar"])) in links("child")

    root, reply = objects[comment_native_id(c["root"])], objects[comment_native_id(c["reply"])]
    assert (
        root.kind == "comment" and root.thread_native_id == epic.native_id and root.parent_native_id == epic.native_id
    )
    assert reply.thread_native_id == epic.native_id and reply.parent_native_id == root.native_id
    assert {(x.relation, x.native_id) for x in reply.links} == {
        ("comment_on", epic.native_id),
        ("reply_to", root.native_id),
    }
    assert reply.author == "bob" and reply.native_fields["linear_identifier"] == "ENG-1"
    assert objects[comment_native_id(c["other"])].author == "GitHub", "a bot's comment is attributed to the bot"

    # Archived and trashed issues are deletions, with their comments; nothing of another team or private.
    assert deleted(events) == {
        issue_native_id(i["archived"]),
        issue_native_id(i["trashed"]),
        comment_native_id(c["on_archived"]),
    }
    assert issue_native_id(i["related"]) not in objects and issue_native_id(i["secret"]) not in objects
    assert len([o for o in objects.values() if o.kind == "issue"]) == 47

    pages = fake.calls_of("TeamIssues")
    assert len(pages) == 5 and pages[0].variables["after"] is None
    assert all(p.variables["after"] for p in pages[1:]), "pages follow pageInfo.endCursor"
    checkpoints = [e for e in events if isinstance(e, Checkpoint)]
    assert len(checkpoints) == len(pages) + len(fake.calls_of("TeamComments")), "a checkpoint after every page"
    assert all(cp.has_more for cp in checkpoints[:-1]) and not checkpoints[-1].has_more


def test_first_sync_is_bounded_by_lookback(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    events = list(provider.sync(harness.ctx({"access_token": seeded.key}), request(seeded.team, None, lookback_days=2)))
    assert by_id(events) == {}, "everything seeded changed more than 2 days ago, except the deletions"
    assert deleted(events) >= {issue_native_id(seeded.issues["archived"]), issue_native_id(seeded.issues["trashed"])}
    [call] = fake.calls_of("TeamIssues")
    since = call.variables["since"]
    assert since == iso_ms(last_state(events)["start"]) and since < call.variables["until"]


# ---- incremental --------------------------------------------------------------------------------------------


def test_next_sync_reads_only_the_window_since_the_last_one(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ctx = harness.ctx({"access_token": seeded.key})
    first = list(provider.sync(ctx, request(seeded.team, None)))
    state = last_state(first)
    i = seeded.issues
    fake.edit_issue(i["grandchild"], title="Port the PDF fonts and icons")
    reply = fake.add_comment(i["child"], "Fonts are in the new bucket now.", user=seeded.user)
    fake.archive_issue(i["child2"])
    fake.clear_calls()

    second = list(provider.sync(ctx, request(seeded.team, state)))
    changed = by_id(second)
    assert set(changed) == {issue_native_id(i["grandchild"]), issue_native_id(i["child"]), comment_native_id(reply)}
    assert changed[issue_native_id(i["grandchild"])].title == "ENG-3 Port the PDF fonts and icons"
    assert deleted(second) == {issue_native_id(i["child2"])}
    for call in fake.calls_of("TeamIssues") + fake.calls_of("TeamComments"):
        assert call.variables["since"] == iso_ms(state["until"] - OVERLAP_S * 1000), "the window, not a rescan"
    assert len(fake.graphql_calls()) == 3, "one page of issues, the archived issue's comments, one page of comments"

    fake.clear_calls()
    third = list(provider.sync(ctx, request(seeded.team, last_state(second))))
    assert by_id(third) == {} and deleted(third) == set(), "the overlap re-reads, it does not re-yield"
    assert [c.operation for c in fake.graphql_calls()] == ["TeamIssues", "TeamComments"]


def test_a_restored_issue_comes_back_with_its_comments(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ctx = harness.ctx({"access_token": seeded.key})
    state = last_state(list(provider.sync(ctx, request(seeded.team, None))))
    epic = seeded.issues["epic"]
    fake.trash_issue(epic)
    second = list(provider.sync(ctx, request(seeded.team, state)))
    thread = {comment_native_id(seeded.comments[k]) for k in ("root", "reply", "reply2")}
    assert deleted(second) >= {issue_native_id(epic)} | thread
    fake.restore_issue(epic)
    third = list(provider.sync(ctx, request(seeded.team, last_state(second))))
    assert {issue_native_id(epic)} | thread <= set(by_id(third)) and deleted(third) == set()


def test_resuming_a_checkpoint_mid_sync_yields_every_object_once(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.page_cap = 7
    ctx = harness.ctx({"access_token": seeded.key})
    whole = by_id(list(provider.sync(ctx, request(seeded.team, None))))
    seen: list[str] = []
    checkpoint: dict[str, Any] | None = None
    for _ in range(50):  # stop after every second checkpoint, as a chunked first sync does
        taken = 0
        for event in provider.sync(ctx, request(seeded.team, checkpoint)):
            if isinstance(event, SyncedObject):
                seen.append(event.native_id)
            elif isinstance(event, Checkpoint):
                checkpoint, taken = event.state, taken + 1
                if not event.has_more or taken == 2:
                    break
        assert checkpoint is not None
        if checkpoint["cycle_done"]:
            break
    assert sorted(seen) == sorted(whole), "nothing skipped, nothing twice"


def test_an_edit_while_paging_is_read_by_the_next_cycle_not_skipped(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.page_cap = 10
    ctx = harness.ctx({"access_token": seeded.key})
    events = provider.sync(ctx, request(seeded.team, None))
    first_page: list[str] = []
    for event in events:
        if isinstance(event, Checkpoint):
            break
        if isinstance(event, SyncedObject):
            first_page.append(event.native_id)
    old = seeded.issues["blocker"]  # far down the newest-first order: not on the first page
    assert issue_native_id(old) not in first_page
    fake.edit_issue(old, description="Rehearsed on Tuesday.")  # moves above the window's `until`
    rest = list(events)
    state = last_state(rest)
    second = by_id(list(provider.sync(ctx, request(seeded.team, state))))
    assert "Rehearsed on Tuesday." in second[issue_native_id(old)].text


# ---- reconcile -----------------------------------------------------------------------------------------------


def test_reconcile_asks_for_the_known_ids_and_misses_only_what_is_gone(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ctx = harness.ctx({"access_token": seeded.key})
    objects = by_id(list(provider.sync(ctx, request(seeded.team, None))))
    known = [KnownObject(o.native_id, o.thread_native_id, o.created_at) for o in objects.values()]
    i, c = seeded.issues, seeded.comments
    fake.delete_comment(c["reply2"])
    fake.purge_issue(i["grandchild"])
    fake.trash_issue(i["dupe"])
    fake.move_issue(i["similar"], seeded.other_team)  # moved, not deleted: the item stays
    fake.clear_calls()
    alive = set(provider.reconcile(ctx, request(seeded.team, None), since=time.time() - 30 * DAY, known=known))
    gone = {o.native_id for o in objects.values()} - alive
    assert gone == {comment_native_id(c["reply2"]), issue_native_id(i["grandchild"]), issue_native_id(i["dupe"])}
    calls = fake.graphql_calls()
    assert {x.operation for x in calls} == {"ExistingIssues", "ExistingComments"} and len(calls) == 2
    assert set(calls[0].variables["ids"]) <= {o.native_id.split("_", 1)[1] for o in objects.values()}


# ---- errors and limits ----------------------------------------------------------------------------------------


def test_rate_limited_is_waited_out_from_the_reset_header(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.rate_limit_next(reset_in_s=3, operation="TeamIssues")
    events = list(provider.sync(harness.ctx({"access_token": seeded.key}), request(seeded.team, None)))
    assert len(by_id(events)) == 51
    [wait] = harness.sleeps
    assert 2.0 <= wait <= 5.0, "X-RateLimit-Requests-Reset (epoch ms) minus now, plus a second"
    statuses = [c.status for c in fake.calls_of("TeamIssues")]
    assert statuses == [400, 200], "Linear answers RATELIMITED with HTTP 400"


def test_rate_limits_beyond_the_bound_are_rate_limited(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.rate_limit_next(reset_in_s=600, status=429)
    with pytest.raises(RateLimited) as info:
        list(provider.sync(harness.ctx({"access_token": seeded.key}, max_wait_s=60), request(seeded.team, None)))
    assert 590 <= info.value.retry_after_s <= 610 and harness.sleeps == []


def test_credentials_errors(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.revoke(seeded.key)
    with pytest.raises(CredentialsRejected, match="Authentication required"):
        list(provider.sync(harness.ctx({"access_token": seeded.key}), request(seeded.team, None)))
    fake.auth_error_status = 401
    with pytest.raises(CredentialsRejected, match="401"):
        provider.account(harness.ctx({"access_token": seeded.key}))
    # An OAuth token past its lifetime: TokenExpired, so the service refreshes and calls once more.
    fake.add_oauth_client("client-1", "secret-1")
    access, _ = fake.issue_oauth_tokens(seeded.user, "client-1")
    fake.expire(access)
    creds = {"access_token": access, "refresh_token": "r", "client_id": "client-1", "client_secret": "secret-1"}
    with pytest.raises(TokenExpired):
        provider.account(harness.ctx(creds, auth_type="oauth"))


def test_a_team_out_of_reach_is_resource_unavailable(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ctx = harness.ctx({"access_token": seeded.key})
    with pytest.raises(ResourceUnavailable, match="Entity not found"):
        list(provider.sync(ctx, request(seeded.private_team, None)))
    with pytest.raises(ResourceUnavailable):
        provider.probe(ctx, request("no-such-team", None))
    with pytest.raises(ResourceUnavailable, match="linear_team"):
        list(provider.sync(ctx, SyncRequest(seeded.team, "repo", None, 0)))


def test_server_errors_and_timeouts_retry_briefly_then_are_transient(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ctx = harness.ctx({"access_token": seeded.key})
    fake.fail_next(503, times=2)
    assert provider.account(ctx).account_scope == "acme" and harness.sleeps == [1.0, 2.0]
    fake.fail_next(502, times=3)
    with pytest.raises(TransientProviderError, match="502"):
        provider.account(ctx)
    fake.fail_next(200, times=3, stall_s=1.0)
    with pytest.raises(TransientProviderError, match="timed out"):
        provider.account(harness.ctx({"access_token": seeded.key}, http_timeout_s=0.3))


def test_probe_says_whether_anything_changed_since_start(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ctx = harness.ctx({"access_token": seeded.key})
    assert provider.probe(ctx, request(seeded.team, None)) is True
    assert provider.probe(ctx, request(seeded.team, None, lookback_days=0.5)) is False
    assert len(fake.calls_of("Probe")) == 2


# ---- OAuth ------------------------------------------------------------------------------------------------------


def _oauth(fake: FakeLinear, seeded: Seeded) -> dict[str, Any]:
    fake.add_oauth_client("client-1", "secret-1")
    access, refresh = fake.issue_oauth_tokens(seeded.user, "client-1", expires_in=3600)
    return {
        "access_token": access,
        "refresh_token": refresh,
        "client_id": "client-1",
        "client_secret": "secret-1",
        "expires_at": time.time() + 3600,
    }


def test_refresh_rotates_through_the_token_endpoint_and_stores_nothing(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = _oauth(fake, seeded)
    ctx = harness.ctx(dict(creds), auth_type="oauth")
    before = time.time()
    rotated = provider.refresh(ctx)
    [call] = fake.calls_of("refresh_token")
    assert call.form["refresh_token"] == creds["refresh_token"] and call.form["client_id"] == "client-1"
    assert rotated["refresh_token"] != creds["refresh_token"] and rotated["access_token"] != creds["access_token"]
    assert before + 86399 <= rotated["expires_at"] <= time.time() + 86399
    assert rotated["client_secret"] == "secret-1" and ctx.credentials == creds and harness.saved == []
    assert provider.account(harness.ctx(rotated, auth_type="oauth")).account_scope == "acme"
    assert fake.calls_of("Account")[-1].authorization == f"Bearer {rotated['access_token']}"
    # Linear rotated the refresh token: the old one is a dead grant, which means re-authorise.
    with pytest.raises(RefreshRejected, match="invalid_grant"):
        provider.refresh(harness.ctx(creds, auth_type="oauth"))


def test_refresh_failures(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = _oauth(fake, seeded)
    with pytest.raises(CredentialsRejected, match="invalid_client"):
        provider.refresh(harness.ctx({**creds, "client_secret": "wrong"}, auth_type="oauth"))
    fake.fail_next(503, operation="refresh_token")
    with pytest.raises(TransientProviderError, match="503"):
        provider.refresh(harness.ctx(creds, auth_type="oauth"))
    fake.revoke_refresh_tokens()
    with pytest.raises(RefreshRejected, match="invalid_grant"):
        provider.refresh(harness.ctx(creds, auth_type="oauth"))


# ---- credentials and catalogue ------------------------------------------------------------------------------------


def test_validate_credentials(provider: ConnectorProvider) -> None:
    assert provider.validate_credentials("api_token", {"access_token": " lin_api_a "}) == {"access_token": "lin_api_a"}
    assert provider.validate_credentials("api_token", {"api_key": "lin_api_a"}) == {"api_key": "lin_api_a"}
    oauth = {"access_token": "a", "refresh_token": "r", "client_id": "c", "client_secret": "S3CRET", "expires_at": 5}
    assert provider.validate_credentials("oauth", oauth) == {**oauth, "expires_at": 5.0}
    for auth_type, creds, message in (
        ("api_token", {}, "access_token is required"),
        ("api_token", {"access_token": "a", "api_key": "b"}, "differ"),
        ("api_token", {"access_token": "a b"}, "without spaces"),
        ("api_token", {"access_token": "a", "refresh_token": "r"}, "refresh_token is not a field"),
        ("oauth", {"access_token": "a", "refresh_token": "r", "client_id": "c"}, "client_secret is required"),
        ("oauth", {**oauth, "expires_at": "soon"}, "epoch seconds"),
        ("basic", {"access_token": "a"}, "auth_type"),
    ):
        with pytest.raises(ValueError, match=message) as info:
            provider.validate_credentials(auth_type, creds)
        assert "S3CRET" not in str(info.value)


def test_credential_schema_matches_validation(provider: ConnectorProvider) -> None:
    import jsonschema

    schema = provider.info.credential_schema
    jsonschema.validate({"access_token": "lin_api_x"}, schema)
    jsonschema.validate({"access_token": "a", "refresh_token": "r", "client_id": "c", "client_secret": "s"}, schema)
    for invalid in ({}, {"access_token": "a", "refresh_token": "r"}, {"refresh_token": "r"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(invalid, schema)
    assert provider.info.resource_types == ("linear_team",) and provider.info.category == "issue_tracker"


def test_an_unreadable_node_is_a_per_object_failure(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    from ctxstore.connectors.linear.mapping import map_comment, map_issue

    assert isinstance(map_issue({"id": "x"}), ObjectFailure)  # no identifier
    failure = map_comment({"id": "y", "issue": None})
    assert isinstance(failure, ObjectFailure) and failure.native_id == comment_native_id("y")


def test_an_unknown_checkpoint_restarts_from_start(
    fake: FakeLinear, seeded: Seeded, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    events = list(provider.sync(harness.ctx({"access_token": seeded.key}), request(seeded.team, {"v": 99})))
    assert len(by_id(events)) == 51
