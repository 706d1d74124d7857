"""GitHub connector end to end: a real `ctxstore serve` whose GitHub provider (githubkit) talks to the fake
GitHub REST API (tests/fakes/github_api.py), one server for the module.

create (account scope from /user) -> discover repos -> configure -> first sync -> items completed, found by
/query, an issue walked by the subgraph read with its comments and cross-references; changes at the fake ->
the next *scheduled* sync applies exactly those (calls asserted: `since` with the overlap, If-None-Match and
304 on idle lists, no rescan); the reconcile cadence and `?full=true`; secondary and primary rate limits;
a revoked token -> sync_blocked, cleared by PATCH credentials; a refused OAuth refresh (bad_refresh_token) ->
needs_reauth; credentials never in an answer or the server log.

The fake's clock is its own (objects are stamped with it); each test sets it near the server's real clock,
so `lookback_days` and the reconcile window (server time) line up with the objects' timestamps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.fakes.github_api import FakeGitHub, RecordedRequest, iso
from tests.fakes.github_seed import seed_small_repo
from tests.support.connectors import (
    DB,
    ConnectorCalls,
    connector,
    connector_env,
    served_database,
    statuses,
    wait_cycles,
    wait_for,
    wait_indexed,
)
from tests.support.server import ServerProcess

DAY = 86400
OVERLAP_S = 3 * 3600  # the documented overlap window of a GitHub stream's `since` (docs/connectors.md)
RECONCILE_S = 15  # this server's reconcile cadence (CTXSTORE_CONNECTOR_RECONCILE_INTERVAL_S; GitHub's own: 6 h)


@dataclass
class GitHubEnv(ConnectorCalls):
    srv: ServerProcess
    fake: FakeGitHub
    c: httpx.Client
    secrets: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    def create(self, credentials: dict[str, Any], **body: Any) -> dict[str, Any]:
        self.secrets += [str(v) for k, v in credentials.items() if k in ("api_token", "access_token", "refresh_token")]
        self.secrets += [str(credentials["client_secret"])] if "client_secret" in credentials else []
        return self.create_connector({"provider": "github", "database": DB, "credentials": credentials, **body})

    def resource(self, connector_id: str) -> dict[str, Any]:
        [res] = self.resources(connector_id).values()
        return res

    def interval(self, connector_id: str, seconds: int) -> None:
        r = self.call("PATCH", f"/connectors/{connector_id}", json={"sync_interval_seconds": seconds})
        assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def gh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHubEnv]:
    with FakeGitHub() as fake:
        env = connector_env(None, fake, CTXSTORE_CONNECTOR_RECONCILE_INTERVAL_S=str(RECONCILE_S))
        with served_database(tmp_path_factory.mktemp("github") / "data", env) as (srv, c):
            yield GitHubEnv(srv, fake, c)


def epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def item(login: str, native_id: str) -> str:
    """The item id of a GitHub object: provider + account scope (the token's login) + native id."""
    return f"github_{login}_{native_id}"


def seed(fake: FakeGitHub, repo: str, token: str, *, extra_issue: str | None = None) -> dict[str, int]:
    """seed_small_repo's issues, PR, comments and review thread, spread over the 12 days before now."""
    fake.now = int(time.time()) - 12 * DAY
    ids = seed_small_repo(fake, repo, owner_token=token)
    if extra_issue:
        ids["extra"] = fake.add_issue(repo, extra_issue, "A tracking issue nobody comments on.")
    fake.now = max(fake.now, int(time.time()))
    return ids


def sub(env: GitHubEnv, item_id: str) -> dict[str, dict[str, Any]]:
    """The subgraph read of an item (the query form: GitHub item ids hold '/' and '#'), members by id."""
    r = env.call("GET", "/context/subgraph", params={"id": item_id, "database": DB})
    assert r.status_code == 200, r.text
    return {m["source_id"]: m for m in r.json()["data"]["sources"]}


def lists_since(fake: FakeGitHub, repo: str) -> list[RecordedRequest]:
    """The incremental list calls of a repo (each stream's `since` queries)."""
    return [r for r in fake.requests if r.path.startswith(f"/repos/{repo}/") and "since" in r.query]


def test_first_sync_query_subgraph_and_system_metadata(gh: GitHubEnv) -> None:
    fake, repo, login, token = gh.fake, "acme/widgets", "acme", "ghp_first_sync_secret"
    fake.add_token(token, login)
    fake.add_repo(repo, description="Widgets and gadgets")
    fake.now = int(time.time()) - 50 * DAY
    ancient = fake.add_issue(repo, "Ancient build failure from last quarter", "Outside the 30-day lookback.")
    ids = seed(fake, repo, token)
    fake.add_repo("acme/empty", description="nothing here")

    created = gh.create({"api_token": token})
    cid = created["connector_id"]
    assert created["provider_account_scope"] == login and created["auth_type"] == "api_token"
    assert created["lifecycle"] == "pending_setup" and created["sync_interval_seconds"] == 3600

    found = gh.call("GET", f"/connectors/{cid}/discover").json()["data"]
    repos = {r["id"]: r for r in found["resources"]}
    assert set(repos) == {"acme/empty", repo} and repos[repo]["resource_type"] == "repo"
    assert repos[repo]["metadata"]["description"] == "Widgets and gadgets" and repos[repo]["metadata"]["owner"] == login
    paged = gh.call("GET", f"/connectors/{cid}/discover", params={"limit": 1}).json()["data"]
    assert [r["id"] for r in paged["resources"]] == ["acme/empty"] and paged["has_more"] is True

    out = gh.configure(
        cid, [{"resource_id": repo, "metadata": {"team": "platform"}}, {"resource_id": "acme/empty"}], lookback_days=30
    )
    assert out["configured"] == 2 and out["backfill"] is True
    assert len(out["warnings"]) == 1 and "acme/empty" in out["warnings"][0]

    data = wait_cycles(gh.c, cid, 1)
    # issue #2, bug #3, PR #4, one issue comment, two review comments; the ancient issue is older than lookback
    assert data["documents_dispatched"] == 6 and data["resources_pending_first_sync"] == 0, data
    assert data["last_error"] == "" and data["lifecycle"] in ("ingesting", "active")
    bug, pr, old = (item(login, f"{repo}#{ids[k]}") for k in ("bug", "pr", "old_issue"))
    comment = item(login, f"{repo}#issuecomment-{ids['comment']}")
    review, reply = (item(login, f"{repo}#discussion_r{ids[k]}") for k in ("review", "review_reply"))
    wait_indexed(gh.c, DB, [bug, pr, old, comment, review, reply])
    assert statuses(gh.c, DB, [item(login, f"{repo}#{ancient}")]) == {}

    hits = gh.c.post("/query", json={"database": DB, "query": "widget renders blank"}).json()["data"]["chunks"]
    assert bug in [h["id"] for h in hits[:3]]
    top = next(h for h in hits if h["id"] == bug)
    assert top["metadata"]["provider"] == "github" and top["metadata"]["team"] == "platform"
    extra = top["additional_metadata"]
    assert extra["connector_id"] == cid and extra["resource_id"] == repo and extra["provider_account_scope"] == login
    assert extra["github_repo"] == repo and extra["github_issue_number"] == ids["bug"] and extra["kind"] == "issue"
    assert extra["github_labels"] == ["bug", "ui"] and extra["url"] == f"https://github.com/{repo}/issues/{ids['bug']}"

    members = sub(gh, bug)
    # its comment (thread and parent), the PR that fixes it and the issue it mentions (cross-references)
    assert {comment, pr, old} <= set(members), sorted(members)
    assert members[pr]["discovered_relation"] == "references"
    assert members[old]["discovered_relation"] == "references"
    assert members[comment]["discovered_relation"] in ("comment_on", "child", "same_thread")
    assert item(login, f"{repo}#{ancient}") not in members  # mentioned ("#1"), never synced: not in the walk
    review_thread = sub(gh, review)
    assert reply in review_thread and pr in review_thread  # a review reply answers its review comment, on the PR

    res = {r["resource_id"]: r for r in gh.call("GET", f"/connectors/{cid}/resources").json()["data"]["resources"]}
    newest = max(i.updated_at for i in fake.repos[repo].issues.values())
    assert res[repo]["provider_cursor"] == iso(newest) and res[repo]["provider_metadata"]["full_name"] == repo
    assert res[repo]["provider_metadata"]["health"]["objects_synced"] == 6
    mine = [r for r in fake.requests if r.path.startswith("/repos/acme/")]
    assert mine and all(r.headers["authorization"] == f"token {token}" for r in mine)


def test_next_scheduled_sync_applies_exactly_the_changes_incrementally(gh: GitHubEnv) -> None:
    fake, repo, login, token = gh.fake, "inc/repo", "inc", "ghp_incremental_secret"
    ids = seed(fake, repo, token, extra_issue="Temporary tracking issue")
    cid = gh.create({"api_token": token})["connector_id"]
    gh.configure(cid, [{"resource_id": repo}])
    first = wait_cycles(gh.c, cid, 1)
    assert first["documents_dispatched"] == 7
    wait_indexed(gh.c, DB, [item(login, f"{repo}#{ids[k]}") for k in ("bug", "extra")])
    r = fake.repos[repo]
    cursors = {
        f"/repos/{repo}/issues": max(i.updated_at for i in r.issues.values()),
        f"/repos/{repo}/issues/comments": max(c.updated_at for c in r.comments.values()),
        f"/repos/{repo}/pulls/comments": max(c.updated_at for c in r.review_comments.values()),
    }

    fake.now = int(time.time()) + 60
    new = fake.add_issue(repo, "Cache eviction storms under peak load", "Evictions spike every hour on the hour.")
    fake.edit_issue(repo, ids["bug"], body="The widget renders blank on Safari only; see #1.")
    new_comment = fake.add_comment(repo, ids["old_issue"], "Still reproducible on the 2.3 release.")  # bumps #1
    fake.delete_comment(repo, ids["comment"])
    fake.delete_issue(repo, ids["extra"])
    # The deletions show through the reconcile, due RECONCILE_S after the first sync's listing.
    done_at = epoch(gh.resource(cid)["first_sync_completed_at"])
    time.sleep(max(0.0, done_at + RECONCILE_S + 1 - time.time()))
    fake.clear_requests()
    gh.interval(cid, 2)
    after = wait_cycles(gh.c, cid, 2)  # the scheduler runs it: no manual trigger
    gh.interval(cid, 3600)
    assert after["last_run"]["trigger"] == "schedule"
    assert after["documents_dispatched"] == 7 + 3, "new issue, edited issue, new comment: exactly those"
    assert after["last_run"]["objects_deleted"] == 2 and after["last_run"]["objects_unchanged"] >= 1  # #1, bumped
    health = gh.resource(cid)["provider_metadata"]["health"]
    assert health["objects_deleted"] == 2 and health["last_reconciled_at"]

    changed = [item(login, f"{repo}#{new}"), item(login, f"{repo}#{ids['bug']}")]
    changed.append(item(login, f"{repo}#issuecomment-{new_comment}"))
    wait_indexed(gh.c, DB, changed)
    gone = [item(login, f"{repo}#{ids['extra']}"), item(login, f"{repo}#issuecomment-{ids['comment']}")]
    assert statuses(gh.c, DB, gone) == {}, "deleted at GitHub, deleted here"
    text = gh.c.get("/context/inspect", params={"database": DB, "id": changed[1], "mode": "content"}).text
    assert "Safari only" in text

    # The calls: each stream once, from its cursor minus the overlap; never back to the first sync's start.
    calls = lists_since(fake, repo)
    for path, cursor in cursors.items():
        mine = [c for c in calls if c.path == path]
        assert len(mine) == 1 and mine[0].query["since"] == iso(cursor - OVERLAP_S), (path, mine)
        assert mine[0].query["sort"] == "updated" and mine[0].query["direction"] == "asc"
    listings = [c for c in fake.requests if c.path.startswith(f"/repos/{repo}/") and "since" not in c.query]
    singles = {(c.path, c.status) for c in listings if "sort" not in c.query}
    assert all(c.query.get("sort") == "created" for c in listings if "sort" in c.query), "reconcile lists, newest first"
    # Known objects the reconcile listing missed are fetched alone: only a 404/410 deletes.
    assert singles == {
        (f"/repos/{repo}/issues/{ids['extra']}", 410),
        (f"/repos/{repo}/issues/comments/{ids['comment']}", 404),
    }
    assert all(c.headers["authorization"] == f"token {token}" for c in fake.requests if c.path.startswith("/repos/"))

    # Idle: the cycle after next asks exactly the same lists with If-None-Match and gets 304s (free).
    gh.interval(cid, 2)
    wait_cycles(gh.c, cid, 3)
    gh.interval(cid, 3600)  # hold the scheduler while the record is cleared
    fake.clear_requests()
    gh.interval(cid, 2)
    idle = wait_cycles(gh.c, cid, 4)
    gh.interval(cid, 3600)
    conditional = lists_since(fake, repo)
    assert len(conditional) == 3 and all(c.status == 304 and c.headers.get("if-none-match") for c in conditional)
    assert idle["documents_dispatched"] == 10, "an unchanged repository dispatches nothing"


def test_reconcile_runs_on_its_cadence_and_on_a_full_sync(gh: GitHubEnv) -> None:
    fake, repo, login, token = gh.fake, "cad/repo", "cad", "ghp_cadence_secret"
    ids = seed(fake, repo, token)
    cid = gh.create({"api_token": token})["connector_id"]
    [catalogue] = gh.call("GET", "/connectors/providers", params={"id": "github"}).json()["data"]["providers"]
    assert catalogue["reconcile_interval_seconds"] == RECONCILE_S and catalogue["reconcile_window_seconds"] == 30 * DAY
    gh.configure(cid, [{"resource_id": repo}])
    wait_cycles(gh.c, cid, 1)
    comment = item(login, f"{repo}#issuecomment-{ids['comment']}")
    wait_indexed(gh.c, DB, [comment])

    # Within the cadence of the first sync's listing: the next cycle reads incrementally and lists nothing.
    fake.delete_comment(repo, ids["comment"])
    fake.clear_requests()
    r = gh.call("POST", f"/connectors/{cid}/sync")
    assert r.status_code == 202 and r.json()["data"]["full"] is False
    wait_cycles(gh.c, cid, 2)
    assert not [c for c in fake.requests if c.query.get("sort") == "created"], "no reconcile listing"
    assert gh.resource(cid)["provider_metadata"]["health"]["last_reconciled_at"] is None
    assert comment in statuses(gh.c, DB, [comment]), "not seen yet: GitHub lists keep no tombstones"

    # A full sync reconciles at once, over everything synced.
    r = gh.call("POST", f"/connectors/{cid}/sync", params={"full": "true"})
    assert r.status_code == 202 and r.json()["data"]["full"] is True
    data = wait_cycles(gh.c, cid, 3)
    assert data["full_sync_requested_at"] and data["last_run"]["trigger"] == "full"
    assert data["last_run"]["objects_deleted"] == 1
    health = gh.resource(cid)["provider_metadata"]["health"]
    assert health["last_reconciled_at"] >= data["full_sync_requested_at"] and health["objects_deleted"] == 1
    assert statuses(gh.c, DB, [comment]) == {}
    listed = {c.path for c in fake.requests if c.query.get("sort") == "created"}
    assert f"/repos/{repo}/issues/comments" in listed and f"/repos/{repo}/issues" in listed
    assert (f"/repos/{repo}/issues/comments/{ids['comment']}", 404) in {(c.path, c.status) for c in fake.requests}


def test_rate_limits_are_waited_out_or_rescheduled_never_blocking(gh: GitHubEnv) -> None:
    fake, repo, token = gh.fake, "rl/repo", "ghp_ratelimit_secret"
    seed(fake, repo, token)
    cid = gh.create({"api_token": token})["connector_id"]
    secondary = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}
    comments = f"/repos/{repo}/issues/comments"
    fake.fail_next(429, times=2, path_contains=comments, headers={"retry-after": "1"}, body=secondary)
    gh.configure(cid, [{"resource_id": repo}])
    data = wait_cycles(gh.c, cid, 1)
    assert data["last_error"] == "" and data["sync_blocked"] is False and data["documents_dispatched"] == 6
    assert [c.status for c in fake.requests if c.path == comments] == [429, 429, 200], "waited, asked again"

    # A primary limit (403 with x-ratelimit-remaining: 0) resetting later than CTXSTORE_CONNECTOR_MAX_WAIT_S:
    # the chunk ends, the sync is rescheduled after the reset; it is not a permission 403 (not blocked).
    reset = int(time.time()) + 120
    limit = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    fake.fail_next(
        403, path_contains=f"/repos/{repo}/issues", headers=limit, body={"message": "API rate limit exceeded"}
    )
    assert gh.call("POST", f"/connectors/{cid}/sync").status_code == 202
    later = wait_for(lambda: (d := connector(gh.c, cid))["last_error"] and d["sync_status"] == "idle" and d, what="rl")
    assert "rate limit" in later["last_error"] and later["sync_blocked"] is False
    assert later["lifecycle"] != "reconnect" and epoch(later["next_sync_at"]) >= reset - 5


def test_revoked_token_blocks_the_connector_and_patch_credentials_clears_it(gh: GitHubEnv) -> None:
    fake, repo, login, token = gh.fake, "rv/repo", "rv", "ghp_revoked_secret"
    seed(fake, repo, token)
    cid = gh.create({"api_token": token})["connector_id"]
    gh.configure(cid, [{"resource_id": repo}])
    wait_cycles(gh.c, cid, 1)
    gh.interval(cid, 1)
    fake.revoke_token(token)
    data = wait_for(lambda: (d := connector(gh.c, cid))["sync_blocked"] and d, what="sync_blocked")
    assert data["lifecycle"] == "reconnect" and "Bad credentials" in data["sync_blocked_reason"]
    assert data["next_sync_at"] is None and data["needs_reauth"] is False
    assert gh.call("POST", f"/connectors/{cid}/sync").status_code == 409
    asked = len([c for c in fake.requests if c.headers.get("authorization") == f"token {token}"])
    time.sleep(2.0)  # several scheduler ticks at a 1 s interval
    assert len([c for c in fake.requests if c.headers.get("authorization") == f"token {token}"]) == asked, "skipped"

    bad = gh.call("PATCH", f"/connectors/{cid}", json={"credentials": {"api_token": "ghp_not_issued"}})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_INPUT"
    stranger = fake.add_token("ghp_stranger_secret", "stranger")
    gh.secrets.append(stranger)
    other = gh.call("PATCH", f"/connectors/{cid}", json={"credentials": {"api_token": stranger}})
    assert other.status_code == 400 and "'stranger', not 'rv'" in other.json()["error"]["message"]
    assert connector(gh.c, cid)["sync_blocked"] is True, "a rejected update changes nothing"

    replacement = fake.add_token("ghp_replacement_secret", login)
    gh.secrets.append(replacement)
    fake.now = int(time.time()) + 60
    fake.add_issue(repo, "Filed after the token was replaced")
    r = gh.call("PATCH", f"/connectors/{cid}", json={"credentials": {"api_token": replacement}})
    assert r.status_code == 200 and r.json()["data"]["credentials_updated"] is True
    data = wait_cycles(gh.c, cid, data["sync_cycles_completed"] + 1)
    gh.interval(cid, 3600)
    assert data["sync_blocked"] is False and data["last_error"] == "" and data["documents_dispatched"] == 7


def test_oauth_rotation_then_bad_refresh_token_sets_needs_reauth(gh: GitHubEnv) -> None:
    fake, repo, login = gh.fake, "oa/repo", "oa"
    seed(fake, repo, "ghp_oauth_owner_secret")
    fake.add_oauth_app("Iv1.ctxstore", "github-client-secret-value")
    access, refresh = fake.issue_oauth_tokens(login, "Iv1.ctxstore", expires_in=60)
    creds = {
        "access_token": access,
        "refresh_token": refresh,
        "client_id": "Iv1.ctxstore",
        "client_secret": "github-client-secret-value",
        "expires_at": time.time() + 60,  # within the 5-minute skew: rotated before the first sync call
    }
    created = gh.create(creds)
    cid = created["connector_id"]
    assert created["auth_type"] == "oauth" and created["provider_account_scope"] == login
    gh.configure(cid, [{"resource_id": repo}])
    data = wait_cycles(gh.c, cid, 1)
    assert data["needs_reauth"] is False and data["documents_dispatched"] == 6
    [rotation] = fake.calls("/login/oauth/access_token", method="POST")
    assert rotation.status == 200
    used = {c.headers["authorization"] for c in fake.requests if c.path.startswith(f"/repos/{repo}/issues")}
    assert used and f"token {access}" not in used, "the rotated token is used, the old one is dead"
    gh.secrets += [u.removeprefix("token ") for u in used] + [r for r in fake.refresh_tokens if r != refresh]

    # GitHub refuses the stored refresh token (revoked app authorisation) when the access token expires.
    fake.refresh_tokens.clear()
    for t in fake.tokens.values():
        if t.login == login and t.expires_at is not None:
            t.expires_at = fake.now - 1
    assert gh.call("POST", f"/connectors/{cid}/sync").status_code == 202
    data = wait_for(lambda: (d := connector(gh.c, cid))["needs_reauth"] and d, what="needs_reauth")
    assert data["lifecycle"] == "reconnect" and "bad_refresh_token" in data["needs_reauth_reason"]
    assert data["needs_reauth_at"] and data["sync_blocked"] is False

    fresh_access, fresh_refresh = fake.issue_oauth_tokens(login, "Iv1.ctxstore")
    gh.secrets += [fresh_access, fresh_refresh]
    patch = {"access_token": fresh_access, "refresh_token": fresh_refresh, "expires_at": time.time() + 28800}
    r = gh.call("PATCH", f"/connectors/{cid}", json={"credentials": patch})
    assert r.status_code == 200 and r.json()["data"]["credentials_updated"] is True
    data = connector(gh.c, cid)
    assert data["needs_reauth"] is False and data["needs_reauth_reason"] == "" and data["lifecycle"] != "reconnect"
    cycles = data["sync_cycles_completed"]
    assert gh.call("POST", f"/connectors/{cid}/sync").status_code == 202
    assert wait_cycles(gh.c, cid, cycles + 1)["last_error"] == ""


def test_credentials_never_in_an_answer_or_the_server_log(gh: GitHubEnv) -> None:
    assert len(gh.secrets) >= 8, "runs after the other tests of this module"
    gh.assert_no_credential_shown()
