"""The GitHub provider through the real githubkit client against the loopback fake GitHub API."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore.connectors.github.mapping import find_references, map_issue_comment
from ctxstore.connectors.github.provider import build_provider
from ctxstore.connectors.github.sync import OVERLAP_S, PER_PAGE, iso
from ctxstore.ports.connector_provider import (
    Checkpoint,
    ConnectorProvider,
    CredentialsRejected,
    KnownObject,
    ObjectFailure,
    ProviderContext,
    RateLimited,
    RefreshRejected,
    ResourceUnavailable,
    SyncedObject,
    SyncEvent,
    SyncRequest,
    TokenExpired,
    TransientProviderError,
)
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_seed import seed_large_repo, seed_small_repo
from tests.support.provider_context import ContextRecorder

DAY = 86400
REPO = "acme/widgets"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


@pytest.fixture
def provider() -> ConnectorProvider:
    return build_provider()


@pytest.fixture
def harness(fake: FakeGitHub) -> ContextRecorder:
    """The fake's clock; a wait advances it (so a reset arrives). `saved`: what the provider persisted itself."""
    return ContextRecorder(fake.base_url, fake.token_url, now=fake.clock, on_sleep=fake.advance)


def request(checkpoint: dict[str, Any] | None, start: float, repo: str = REPO, **kw: Any) -> SyncRequest:
    return SyncRequest(resource_id=repo, resource_type="repo", checkpoint=checkpoint, start=start, **kw)


def objects(events: list[SyncEvent]) -> list[SyncedObject]:
    return [e for e in events if isinstance(e, SyncedObject)]


def by_id(events: list[SyncEvent]) -> dict[str, SyncedObject]:
    return {o.native_id: o for o in objects(events)}


def last_state(events: list[SyncEvent]) -> dict[str, Any]:
    assert isinstance(events[-1], Checkpoint), "a sync ends with a checkpoint"
    return events[-1].state


# ---- account and discovery ---------------------------------------------------------------------


def test_account_names_the_token_user(fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider) -> None:
    fake.add_token("ghp_x", "octocat")
    account = provider.account(harness.ctx({"api_token": "ghp_x"}))
    assert account.account_scope == "octocat"
    assert fake.calls("/user")[0].headers["authorization"] == "token ghp_x"


def test_discover_lists_every_visible_repo_following_link_pages(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.add_token("ghp_x", "octocat")
    for n in range(105):
        fake.add_repo(f"octocat/repo{n:03d}", private=n % 2 == 0, default_branch="trunk" if n == 0 else "main")
    fake.add_repo("someone/else")  # not visible to octocat
    fake.add_repo("org/shared", members=["octocat"])
    ctx = harness.ctx({"api_token": "ghp_x"})

    page = provider.discover(ctx)
    names = [r.resource_id for r in page.resources]
    assert len(names) == 106 and "org/shared" in names and "someone/else" not in names
    assert page.next_cursor is None
    assert len(fake.calls("/user/repos")) == 2  # followed rel="next"
    first = next(r for r in page.resources if r.resource_id == "octocat/repo000")
    assert first.resource_type == "repo"
    assert first.metadata["private"] is True and first.metadata["default_branch"] == "trunk"
    assert first.metadata["full_name"] == "octocat/repo000"

    paged = provider.discover(ctx, limit=50)
    assert len(paged.resources) == 50 and paged.next_cursor == "2"
    rest = provider.discover(ctx, cursor=paged.next_cursor, limit=50)
    assert rest.resources[0].resource_id == names[50]


# ---- first sync, mapping, incremental ----------------------------------------------------------


def test_first_sync_is_bounded_by_start_and_maps_the_graph(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ids = seed_small_repo(fake, REPO)
    ctx = harness.ctx({"api_token": "ghp_owner"})
    start = fake.now - 5 * DAY  # the "ancient" issue is 10 days old and untouched since

    events = list(provider.sync(ctx, request(None, start)))
    got = by_id(events)
    bug, pr = f"{REPO}#{ids['bug']}", f"{REPO}#{ids['pr']}"
    comment = f"{REPO}#issuecomment-{ids['comment']}"
    review, reply = f"{REPO}#discussion_r{ids['review']}", f"{REPO}#discussion_r{ids['review_reply']}"
    assert set(got) == {bug, pr, comment, review, reply}
    for call in fake.calls():
        assert call.query["since"] == iso(start) and call.query["sort"] == "updated"
        assert call.query["direction"] == "asc" and call.query["per_page"] == str(PER_PAGE)
    assert fake.calls("/issues")[0].query["state"] == "all"

    assert got[bug].kind == "issue" and got[pr].kind == "pull_request"
    assert got[bug].title == "Widget renders blank" and "labels: bug, ui" in got[bug].text
    assert got[bug].native_fields["github_issue_number"] == ids["bug"]
    assert {(link.native_id, link.relation) for link in got[bug].links} == {
        (f"{REPO}#{ids['old_issue']}", "references"),  # "#1"
        ("acme/gadgets#7", "references"),  # another repo
    }
    assert (bug, "references") in {(link.native_id, link.relation) for link in got[pr].links}  # "Fixes #2"
    assert (f"{REPO}#{ids['old_issue']}", "references") in {(x.native_id, x.relation) for x in got[pr].links}  # URL
    assert got[pr].native_fields["github_closes"] == [bug]

    assert got[comment].kind == "comment"
    assert got[comment].parent_native_id == bug and got[comment].thread_native_id == bug
    assert {(x.native_id, x.relation) for x in got[comment].links} == {(bug, "comment_on"), (pr, "references")}
    assert got[reply].parent_native_id == review and got[reply].thread_native_id == pr
    assert {(x.native_id, x.relation) for x in got[reply].links} == {(pr, "comment_on"), (review, "reply_to")}

    checkpoints = [e for e in events if isinstance(e, Checkpoint)]
    assert len(checkpoints) == 3  # one per page (one page per stream here)
    assert [c.has_more for c in checkpoints] == [True, True, False]


def test_second_sync_is_incremental_with_overlap_and_conditional_requests(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ids = seed_small_repo(fake, REPO)
    ctx = harness.ctx({"api_token": "ghp_owner"})
    first = list(provider.sync(ctx, request(None, fake.now - 30 * DAY)))
    state = last_state(first)
    cursor = state["streams"]["issues"]["cursor"]
    fake.clear_requests()

    # Nothing changed: the overlap window is re-read, nothing is yielded again.
    second = list(provider.sync(ctx, request(state, 0)))
    assert objects(second) == []
    assert fake.calls("/issues")[0].query["since"] == iso(cursor - OVERLAP_S)
    assert all(c.status == 200 for c in fake.calls())
    fake.clear_requests()

    # Still nothing: the same queries go out conditionally and GitHub answers 304 (free of rate limit).
    third = list(provider.sync(ctx, request(last_state(second), 0)))
    assert objects(third) == []
    calls = fake.calls()
    assert len(calls) == 3 and all(c.status == 304 and c.headers.get("if-none-match") for c in calls)
    assert last_state(third)["streams"]["issues"]["cursor"] == cursor
    fake.clear_requests()

    # Changes: an edit, a new comment (bumps its issue), an edited comment, a new issue.
    fake.advance(3600)
    fake.edit_issue(REPO, ids["old_issue"], state="closed")
    new_comment = fake.add_comment(REPO, ids["pr"], "Merged, thanks.")
    fake.edit_comment(REPO, ids["comment"], "Reproduced on 2.1 too.")
    new_issue = fake.add_issue(REPO, "Docs typo")
    fake.merge_pull_request(REPO, ids["pr"])
    fourth = list(provider.sync(ctx, request(last_state(third), 0)))
    got = by_id(fourth)
    assert set(got) == {
        f"{REPO}#{ids['old_issue']}",
        f"{REPO}#{ids['pr']}",
        f"{REPO}#{new_issue}",
        f"{REPO}#issuecomment-{new_comment}",
        f"{REPO}#issuecomment-{ids['comment']}",
    }
    assert "closed" in got[f"{REPO}#{ids['old_issue']}"].text
    assert got[f"{REPO}#{ids['pr']}"].native_fields["github_merged"] is True
    assert "closed (merged)" in got[f"{REPO}#{ids['pr']}"].text
    assert got[f"{REPO}#issuecomment-{ids['comment']}"].text.endswith("Reproduced on 2.1 too.")
    assert len(objects(fourth)) == len(got)  # each once
    # The ETag of the unchanged review-comment stream still matched: 304.
    assert fake.calls("/pulls/comments")[0].status == 304


def test_new_only_skips_edits_of_synced_objects(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ids = seed_small_repo(fake, REPO)
    ctx = harness.ctx({"api_token": "ghp_owner"})
    state = last_state(list(provider.sync(ctx, request(None, fake.now - 30 * DAY, sync_mode="new_only"))))
    fake.advance(60)
    fake.edit_issue(REPO, ids["bug"], title="Widget renders blank (edited)")
    new_issue = fake.add_issue(REPO, "Brand new")
    new_comment = fake.add_comment(REPO, ids["bug"], "A new comment")
    got = by_id(list(provider.sync(ctx, request(state, 0, sync_mode="new_only"))))
    assert set(got) == {f"{REPO}#{new_issue}", f"{REPO}#issuecomment-{new_comment}"}


# ---- checkpoints and large syncs ---------------------------------------------------------------


def _first_chunk(
    provider: ConnectorProvider, ctx: ProviderContext, req: SyncRequest
) -> tuple[list[SyncedObject], Checkpoint]:
    """Consume until the first checkpoint, then stop (what the service does for a bounded chunk)."""
    got: list[SyncedObject] = []
    stream = provider.sync(ctx, req)
    for event in stream:
        if isinstance(event, SyncedObject):
            got.append(event)
        elif isinstance(event, Checkpoint):
            stream.close()  # type: ignore[attr-defined]  # a generator
            return got, event
    raise AssertionError("no checkpoint")


def test_resume_from_a_checkpoint_yields_every_object_exactly_once(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_large_repo(fake, "bench/mid", issues=250, comments_per_issue=1, owner_token="ghp_bench")
    ctx = harness.ctx({"api_token": "ghp_bench"})
    start = fake.now - 30 * DAY
    seen: list[str] = []
    checkpoint: dict[str, Any] | None = None
    chunks = 0
    while True:
        got, cp = _first_chunk(provider, ctx, request(checkpoint, start, repo="bench/mid"))
        seen += [o.native_id for o in got]
        checkpoint, chunks = cp.state, chunks + 1
        if chunks == 2:
            # Between chunks an already-read issue is edited: it moves to the end of the updated order.
            # Offset paging would now skip one issue; the keyset cannot.
            fake.advance(60)
            fake.edit_issue("bench/mid", 3, body="edited while the sync was paused")
        if not cp.has_more:
            break
    assert chunks == 3 + 3 + 1  # issues (the edited one arrives on the third page), comments, review comments
    assert len(seen) == 250 + 250 + 1
    assert seen.count("bench/mid#3") == 2 and len(set(seen)) == 500  # the edit re-yields #3, nothing else twice


def test_a_page_of_items_updated_in_the_same_second_is_stepped_through(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.add_token("ghp_x", "acme")
    fake.add_repo(REPO)
    for n in range(230):  # a bulk edit: every issue at one timestamp
        fake.add_issue(REPO, f"Issue {n}")
    ctx = harness.ctx({"api_token": "ghp_x"})
    events = list(provider.sync(ctx, request(None, fake.now - DAY)))
    assert len(by_id(events)) == 230 == len(objects(events))
    pages = [c.query.get("page", "1") for c in fake.calls("/issues")]
    assert pages == ["1", "1", "2", "3"]  # since=start, then since=<the second> stepping its pages


# ---- deletions ----------------------------------------------------------------------------------


def test_reconcile_lists_what_exists_so_deletions_show(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    ids = seed_small_repo(fake, REPO)
    ctx = harness.ctx({"api_token": "ghp_owner"})
    req = request(None, 0)
    synced = list(by_id(list(provider.sync(ctx, req))).values())
    known = [KnownObject(o.native_id, o.thread_native_id, o.created_at) for o in synced]
    everything = set(provider.reconcile(ctx, req, since=None, known=known) or [])
    assert everything == {k.native_id for k in known} and len(everything) == 6

    fake.delete_issue(REPO, ids["old_issue"])
    fake.delete_comment(REPO, ids["comment"])
    fake.delete_review_comment(REPO, ids["review_reply"])
    fake.clear_requests()
    now = set(provider.reconcile(ctx, req, since=None, known=known) or [])
    assert everything - now == {
        f"{REPO}#{ids['old_issue']}",
        f"{REPO}#issuecomment-{ids['comment']}",
        f"{REPO}#discussion_r{ids['review_reply']}",
    }
    lists = [c for c in fake.calls() if c.path.endswith(("/issues", "/comments"))]
    assert len(lists) == 3 and all(c.query["sort"] == "created" and c.query["direction"] == "desc" for c in lists)
    # Each missing object was confirmed alone: only GitHub's 410/404 makes it a deletion.
    assert fake.calls(f"/issues/{ids['old_issue']}")[0].status == 410
    assert fake.calls(f"/issues/comments/{ids['comment']}")[0].status == 404
    assert fake.calls(f"/pulls/comments/{ids['review_reply']}")[0].status == 404

    # Bounded by creation time: the service hands over its objects created since then; only those are listed.
    since = fake.now - DAY - 15 * 60
    in_range = [k for k in known if (k.created_at or 0) >= since]
    assert len(in_range) == 2
    recent = set(provider.reconcile(ctx, req, since=since, known=in_range) or [])
    assert recent == {f"{REPO}#discussion_r{ids['review']}"}


def test_reconcile_is_not_fooled_by_a_deletion_during_the_listing(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.add_token("ghp_x", "acme")
    fake.add_repo(REPO)
    for n in range(150):
        fake.add_issue(REPO, f"Issue {n + 1}")
        fake.advance(60)
    known = [KnownObject(f"{REPO}#{n}", f"{REPO}#{n}", None) for n in range(1, 151)]

    def delete_between_pages(method: str, path: str, query: dict[str, str]) -> None:
        if path.endswith("/issues") and query.get("page") == "2" and not fake.repos[REPO].issues[120].deleted:
            fake.delete_issue(REPO, 120)  # on page 1, already read: issue 50 slides from page 2 onto page 1

    fake.before_request.append(delete_between_pages)
    present = set(
        provider.reconcile(harness.ctx({"api_token": "ghp_x"}), request(None, 0), since=None, known=known) or []
    )
    # Issue 120 was read before it went (the next reconcile drops it); issue 50 slid past the page boundary,
    # so the pages missed it: fetched alone, it is alive and not reported deleted.
    assert present == {k.native_id for k in known}
    assert [c.status for c in fake.calls("/issues/50")] == [200]
    fake.before_request.clear()
    again = set(
        provider.reconcile(harness.ctx({"api_token": "ghp_x"}), request(None, 0), since=None, known=known) or []
    )
    assert {k.native_id for k in known} - again == {f"{REPO}#120"}


def test_reconcile_lists_only_what_known_objects_need(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_large_repo(fake, "bench/mid", issues=300, comments_per_issue=1, span_days=30, owner_token="ghp_bench")
    ctx = harness.ctx({"api_token": "ghp_bench"})
    req = request(None, 0, repo="bench/mid")
    recent = [KnownObject(f"bench/mid#{n}", None, None) for n in range(251, 301)]
    listed = list(provider.reconcile(ctx, req, since=fake.now - 5 * DAY, known=recent) or [])
    assert 45 <= len(listed) <= 55  # the last 5 of 30 days
    assert len(fake.calls()) == 1  # newest first, the first page reaches `since`; no known comments: not listed

    fake.clear_requests()
    newest = [KnownObject("bench/mid#300", None, None)]
    assert "bench/mid#300" in (provider.reconcile(ctx, req, since=None, known=newest) or [])
    assert len(fake.calls()) == 1  # stops once every known object has been seen


# ---- errors ---------------------------------------------------------------------------------------


def test_revoked_token_is_credentials_rejected(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    fake.revoke_token("ghp_owner")
    ctx = harness.ctx({"api_token": "ghp_owner"})
    with pytest.raises(CredentialsRejected, match="401"):
        list(provider.sync(ctx, request(None, 0)))
    with pytest.raises(CredentialsRejected):
        provider.account(ctx)


def test_forbidden_repo_that_is_not_a_rate_limit_is_credentials_rejected(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    fake.deny_repo("ghp_owner", REPO)
    with pytest.raises(CredentialsRejected, match=r"403.*not accessible"):
        list(provider.sync(harness.ctx({"api_token": "ghp_owner"}), request(None, 0)))
    assert harness.sleeps == []  # not mistaken for a rate limit


def test_missing_repo_is_resource_unavailable(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    ctx = harness.ctx({"api_token": "ghp_owner"})
    with pytest.raises(ResourceUnavailable, match="404"):
        list(provider.sync(ctx, request(None, 0, repo="acme/gone")))
    with pytest.raises(ResourceUnavailable):
        list(provider.sync(ctx, request(None, 0, repo="not a repo")))


def test_server_errors_retry_briefly_then_are_transient(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    ctx = harness.ctx({"api_token": "ghp_owner"})
    fake.fail_next(502, times=1, path_contains="/issues")
    assert len(by_id(list(provider.sync(ctx, request(None, 0))))) == 6  # one 502 absorbed
    assert harness.sleeps == [1.0]

    fake.fail_next(503, times=3, path_contains="/issues")
    with pytest.raises(TransientProviderError, match="503"):
        list(provider.sync(ctx, request(None, 0)))


def test_timeouts_are_transient(fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider) -> None:
    seed_small_repo(fake, REPO)
    fake.stall_next(0.6, times=3)
    with pytest.raises(TransientProviderError, match="timed out"):
        provider.account(harness.ctx({"api_token": "ghp_owner"}, http_timeout_s=0.2))


def test_secondary_rate_limit_is_waited_out_within_bound(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    fake.secondary_rate_limit(30)
    events = list(provider.sync(harness.ctx({"api_token": "ghp_owner"}, max_wait_s=60), request(None, 0)))
    assert len(by_id(events)) == 6
    assert harness.sleeps == [30.0]


def test_secondary_rate_limit_without_headers_waits_a_minute(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    fake.secondary_rate_limit(None, status=403)  # only the message says it is a limit, not a permission
    assert provider.account(harness.ctx({"api_token": "ghp_owner"}, max_wait_s=90)).account_scope == "acme"
    assert harness.sleeps == [60.0]
    fake.secondary_rate_limit(None, status=403)
    with pytest.raises(RateLimited):
        provider.account(harness.ctx({"api_token": "ghp_owner"}, max_wait_s=30))


def test_primary_rate_limit_waits_for_the_reset_within_bound(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    fake.exhaust_rate_limit("ghp_owner", reset_in=20)
    events = list(provider.sync(harness.ctx({"api_token": "ghp_owner"}, max_wait_s=60), request(None, 0)))
    assert len(by_id(events)) == 6
    assert harness.sleeps == [21.0]  # until x-ratelimit-reset, plus a second
    first = fake.calls("/issues")[0]
    assert first.status == 403


def test_rate_limits_beyond_the_bound_are_rate_limited(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    fake.secondary_rate_limit(600)
    with pytest.raises(RateLimited) as secondary:
        list(provider.sync(harness.ctx({"api_token": "ghp_owner"}, max_wait_s=60), request(None, 0)))
    assert secondary.value.retry_after_s == 600

    fake.exhaust_rate_limit("ghp_owner", reset_in=3600)
    with pytest.raises(RateLimited) as primary:
        provider.account(harness.ctx({"api_token": "ghp_owner"}, max_wait_s=60))
    assert primary.value.retry_after_s == 3601
    assert harness.sleeps == []


# ---- OAuth ----------------------------------------------------------------------------------------


def _oauth_setup(fake: FakeGitHub) -> dict[str, Any]:
    seed_small_repo(fake, REPO)
    fake.add_oauth_app("Iv1.client", "s3cret")
    access, refresh = fake.issue_oauth_tokens("acme", "Iv1.client", expires_in=3600)
    return {
        "access_token": access,
        "refresh_token": refresh,
        "client_id": "Iv1.client",
        "client_secret": "s3cret",
        "expires_at": fake.now + 3600,
    }


def test_oauth_refresh_rotates_the_refresh_token_and_stores_nothing(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = _oauth_setup(fake)
    ctx = harness.ctx(dict(creds), auth_type="oauth")
    fake.clear_requests()
    rotated = provider.refresh(ctx)
    assert [r.path for r in fake.requests] == ["/login/oauth/access_token"]
    assert rotated["client_id"] == "Iv1.client" and rotated["client_secret"] == "s3cret"  # the rest is kept
    assert rotated["refresh_token"] != creds["refresh_token"] and rotated["access_token"] != creds["access_token"]
    assert rotated["expires_at"] == fake.now + 28800 and rotated["refresh_token_expires_at"] == fake.now + 15897600
    assert ctx.credentials == creds and harness.saved == []  # persisting is the service's job
    assert provider.account(harness.ctx(rotated, auth_type="oauth")).account_scope == "acme"

    # GitHub invalidated the old refresh token: exchanging it again is rejected, which means re-authorise.
    with pytest.raises(RefreshRejected, match="bad_refresh_token"):
        provider.refresh(harness.ctx(creds, auth_type="oauth"))


def test_an_expired_oauth_token_is_token_expired_and_a_refresh_resumes(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = _oauth_setup(fake)
    fake.advance(3600)  # past the access token's lifetime
    ctx = harness.ctx(dict(creds), auth_type="oauth")
    with pytest.raises(TokenExpired, match="401"):
        list(provider.sync(ctx, request(None, 0)))
    # What the connector service does on TokenExpired: refresh, persist, call once more.
    ctx.credentials = provider.refresh(ctx)
    fake.clear_requests()
    assert len(by_id(list(provider.sync(ctx, request(None, 0))))) == 6
    assert {c.headers["authorization"] for c in fake.calls()} == {f"token {ctx.credentials['access_token']}"}


def test_oauth_rejected_client_is_credentials_rejected(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = {**_oauth_setup(fake), "client_secret": "wrong"}
    with pytest.raises(CredentialsRejected, match="incorrect_client_credentials"):
        provider.refresh(harness.ctx(creds, auth_type="oauth"))


def test_oauth_token_endpoint_outage_is_transient(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = _oauth_setup(fake)
    fake.fail_next(503, path_contains="/login/oauth")
    with pytest.raises(TransientProviderError):
        provider.refresh(harness.ctx(creds, auth_type="oauth"))


# ---- credentials and catalogue --------------------------------------------------------------------


def test_validate_credentials(provider: ConnectorProvider) -> None:
    assert provider.validate_credentials("api_token", {"api_token": " ghp_a "}) == {"api_token": "ghp_a"}
    assert provider.validate_credentials("api_token", {"access_token": "ghp_a"}) == {"access_token": "ghp_a"}
    oauth = {"refresh_token": "ghr_1", "client_id": "Iv1.x", "client_secret": "S3CRET-VALUE", "expires_at": 5}
    assert provider.validate_credentials("oauth", oauth) == {**oauth, "expires_at": 5.0}
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("api_token", {}, "api_token is required"),
        ("api_token", {"api_token": "ghp_a", "access_token": "ghp_b"}, "differ"),
        ("api_token", {"api_token": ""}, "api_token must be"),
        ("api_token", {"api_token": "ghp_a", "extra": 1}, "extra is not a field"),
        ("oauth", {"refresh_token": "ghr_1", "client_id": "x"}, "client_secret is required"),
        ("oauth", {**oauth, "expires_at": "soon"}, "expires_at must be"),
        ("basic", {"api_token": "ghp_a"}, "auth_type must be"),
    ]
    for auth_type, creds, message in bad:
        with pytest.raises(ValueError, match=message) as err:
            provider.validate_credentials(auth_type, creds)
        assert "ghp_b" not in str(err.value) and "S3CRET-VALUE" not in str(err.value)


def test_credential_schema_matches_validation(provider: ConnectorProvider) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = provider.info.credential_schema
    jsonschema.validate({"api_token": "ghp_a"}, schema)
    jsonschema.validate({"access_token": "ghp_a"}, schema)
    jsonschema.validate({"refresh_token": "r", "client_id": "c", "client_secret": "s", "access_token": "a"}, schema)
    for invalid in ({}, {"api_token": "a", "refresh_token": "r"}, {"refresh_token": "r"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(invalid, schema)
    info = provider.info
    assert info.provider == "github" and info.resource_types == ("repo",)
    assert set(info.indexed_object_types) == {"issue", "pull_request", "comment"}
    assert info.min_sync_interval_s <= info.default_sync_interval_s <= info.max_sync_interval_s


def test_unreadable_items_are_per_object_failures(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    ctx = harness.ctx({"api_token": "ghp_owner"})
    failure = map_issue_comment(REPO, {"id": 9, "issue_url": "nowhere", "updated_at": "2026-01-01T00:00:00Z"})
    assert isinstance(failure, ObjectFailure) and failure.native_id == f"{REPO}#issuecomment-9"
    assert all(not isinstance(e, ObjectFailure) for e in provider.sync(ctx, request(None, 0)))


def test_cross_reference_forms() -> None:
    text = (
        "Fixes #12, closes Acme/Widgets#13 and resolves https://github.com/acme/widgets/pull/14.\n"
        "See GH-15, other/repo#16 and https://ghe.corp/acme/widgets/issues/17; not https://elsewhere.io/a/b/issues/18.\n"
        "Not code: `#19` or\n```\nrun #20\n```\nnor &#21; nor page#22 nor #L23."
    )
    refs = dict(find_references(text, "acme/widgets", ["github.com", "ghe.corp"]))
    assert refs == {
        "acme/widgets#12": True,
        "acme/widgets#13": True,
        "acme/widgets#14": True,
        "acme/widgets#15": False,
        "other/repo#16": False,
        "acme/widgets#17": False,
    }


def test_an_unknown_checkpoint_restarts_from_start(
    fake: FakeGitHub, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    seed_small_repo(fake, REPO)
    events = list(provider.sync(harness.ctx({"api_token": "ghp_owner"}), request({"v": 99}, fake.now - 5 * DAY)))
    assert len(objects(events)) == 5
    assert fake.calls("/issues")[0].query["since"] == iso(fake.now - 5 * DAY)


def test_the_catalogue_does_not_import_the_sdk() -> None:
    code = (
        "import sys, ctxstore.connectors.github.provider as g; p = g.build_provider(); "
        "p.validate_credentials('api_token', {'api_token': 'x'}); assert p.info.provider == 'github'; "
        "assert 'githubkit' not in sys.modules, 'githubkit imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
