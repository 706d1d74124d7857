"""Linear connectors end to end: a real `ctxstore serve` whose Linear provider (GraphQL over httpx) talks to the
fake Linear API (tests/fakes/linear_api.py), token endpoint included.

first sync -> searchable -> the subgraph walks sub-issues, relations and comment threads; changes at the fake
-> the next *scheduled* cycle applies exactly those (calls asserted: the window, not a rescan); archived,
trashed and deleted objects are deleted here; an access token that expires mid-sync is refreshed and the sync
finishes; the rotated refresh token survives a kill -9; a refused refresh -> needs_reauth -> PATCH credentials
-> syncing again; an API-key connector never reaches needs_reauth; no credential in an answer or the log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.linear_api import FakeLinear
from tests.fakes.linear_seed import Seeded, seed_workspace
from tests.support.connectors import (
    DB,
    ConnectorCalls,
    connector,
    fast_scheduler_env,
    ready_database,
    served_database,
    statuses,
    wait_cycles,
    wait_for,
    wait_indexed,
)
from tests.support.server import ServerProcess

PAGE_CAP = 20  # the fake answers at most 20 nodes a page: every first sync here spans several pages


def linear_env(fake: FakeLinear, **extra: str) -> dict[str, str]:
    # Linear's reconcile runs every 6 h; here every cycle, so a hard deletion shows on the next one.
    settings = {"CTXSTORE_CONNECTOR_RECONCILE_INTERVAL_S": "0", **extra}
    return fast_scheduler_env(
        CTXSTORE_CONNECTOR_BASE_URL_LINEAR=fake.base_url, CTXSTORE_CONNECTOR_TOKEN_URL_LINEAR=fake.token_url, **settings
    )


@dataclass
class LinearEnv(ConnectorCalls):
    srv: ServerProcess
    fake: FakeLinear
    c: httpx.Client
    secrets: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    def create(self, scope: str, credentials: dict[str, Any], **body: Any) -> dict[str, Any]:
        self.secrets += [str(v) for k, v in credentials.items() if k != "expires_at"]
        payload = {"provider": "linear", "database": DB, "provider_account_scope": scope, "credentials": credentials}
        return self.create_connector({**payload, **body})

    def configure_teams(self, connector_id: str, teams: list[str]) -> dict[str, Any]:
        return self.configure(connector_id, [{"resource_id": t} for t in teams])


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLinear]:
    with FakeLinear() as server:
        server.page_cap = PAGE_CAP
        yield server


@pytest.fixture(scope="module")
def env(fake: FakeLinear, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinearEnv]:
    """One real `ctxstore serve` on the fake Linear API, shared by this module's tests."""
    with served_database(tmp_path_factory.mktemp("linear") / "data", linear_env(fake), timeout=120) as (srv, c):
        yield LinearEnv(srv, fake, c)


def item(scope: str, native_id: str) -> str:
    return f"linear_{scope}_{native_id}"


def issue_item(scope: str, issue_id: str) -> str:
    return item(scope, f"issue_{issue_id}")


def comment_item(scope: str, comment_id: str) -> str:
    return item(scope, f"comment_{comment_id}")


def subgraph(env: LinearEnv, item_id: str) -> dict[str, str]:
    r = env.c.get(f"/context/{item_id}/subgraph", params={"database": DB})
    assert r.status_code == 200, r.text
    return {m["source_id"]: m.get("discovered_relation", "root") for m in r.json()["data"]["sources"]}


def oauth_pair(env: LinearEnv, seeded: Seeded, *, expires_in: float = 3600) -> dict[str, Any]:
    env.fake.add_oauth_client("ctxstore-app", "client-secret-value")
    access, refresh = env.fake.issue_oauth_tokens(seeded.user, "ctxstore-app", expires_in=expires_in)
    env.secrets += [access, refresh, "client-secret-value"]
    return {
        "access_token": access,
        "refresh_token": refresh,
        "client_id": "ctxstore-app",
        "client_secret": "client-secret-value",
        "expires_at": time.time() + expires_in,
    }


def bearers(fake: FakeLinear, *, since: int = 0) -> list[str]:
    return [c.authorization.removeprefix("Bearer ") for c in fake.graphql_calls()[since:]]


def test_first_sync_searchable_and_the_subgraph_walks_sub_issues_relations_and_threads(env: LinearEnv) -> None:
    s = seed_workspace(env.fake, key="lin_api_first_sync_secret", filler=20)
    env.secrets.append(s.key)
    created = env.create("acme-first", {"access_token": s.key})
    cid = created["connector_id"]
    assert created["auth_type"] == "api_token" and created["lifecycle"] == "pending_setup"
    found = env.call("GET", f"/connectors/{cid}/discover").json()["data"]["resources"]
    teams = {r["id"]: r for r in found}
    assert teams[s.team]["name"] == "Engineering" and teams[s.team]["resource_type"] == "linear_team"
    assert s.private_team not in teams, "a private team the user is not a member of"

    env.fake.clear_calls()
    out = env.configure_teams(cid, [s.team])
    assert out["configured"] == 1 and out["warnings"] == []
    data = wait_cycles(env.c, cid, 1)
    # ENG: 9 named issues + 13 of the 20 fillers, minus the archived and trashed one; 4 live comments.
    assert data["documents_dispatched"] == 20 + 4 and data["last_error"] == ""
    assert len(env.fake.calls_of("TeamIssues")) == 2, "two pages of at most 20 issues"
    scope, i, cm = "acme-first", s.issues, s.comments
    ids = [issue_item(scope, i[k]) for k in ("epic", "child", "grandchild", "child2", "blocker", "dupe", "similar")]
    ids += [comment_item(scope, cm[k]) for k in ("root", "reply", "reply2", "other")]
    wait_indexed(env.c, DB, ids)
    for gone in (issue_item(scope, i["archived"]), issue_item(scope, i["trashed"]), issue_item(scope, i["related"])):
        assert statuses(env.c, DB, [gone]) == {}, "archived, trashed or another team's: not synced"

    hits = env.c.post("/query", json={"database": DB, "query": "billing service migration to the new cluster"})
    top = hits.json()["data"]["chunks"][0]
    assert top["id"] == issue_item(scope, i["epic"])
    assert top["metadata"]["provider"] == "linear" and top["metadata"]["connector_id"] == cid
    extra = top["additional_metadata"]
    assert extra["linear_identifier"] == "ENG-1" and extra["linear_state"] == "In Progress"
    assert extra["resource_id"] == s.team and extra["provider_account_scope"] == scope
    assert extra["linear_workspace"] == "acme" and extra["url"] == "https://linear.app/acme/issue/ENG-1"

    only = {"additional_metadata": {"linear_identifier": "ENG-3"}}
    hits = env.c.post("/query", json={"database": DB, "query": "fonts", "metadata_filters": only}).json()["data"]
    assert {h["id"] for h in hits["chunks"]} == {issue_item(scope, i["grandchild"])}, "a catalogued filter key"
    [detail] = env.call("GET", "/connectors/providers", params={"id": "linear"}).json()["data"]["providers"]
    assert "additional_metadata.linear_identifier" in {f["filter_key"] for f in detail["filterable_fields"]}
    assert detail["resource_types"] == ["linear_team"] and detail["auth_types"] == ["api_token", "oauth"]

    # The walk reports the relation of the edge each member was found through: links (child_of, comment_on,
    # reply_to, Linear's relation types) rank before the structural parent/child/thread edges they mirror.
    epic = subgraph(env, issue_item(scope, i["epic"]))
    assert epic[issue_item(scope, i["child"])] == "child_of" and epic[issue_item(scope, i["child2"])] == "child_of"
    assert epic[issue_item(scope, i["grandchild"])] == "child_of", "a sub-issue of a sub-issue"
    assert epic[issue_item(scope, i["blocker"])] == "blocked_by"
    for k in ("root", "reply", "reply2"):
        assert epic[comment_item(scope, cm[k])] == "comment_on", "the issue's comment thread"
    assert epic[issue_item(scope, i["dupe"])] == "duplicated_by" and epic[issue_item(scope, i["similar"])] == "similar"
    thread = subgraph(env, comment_item(scope, cm["root"]))
    assert (
        thread[comment_item(scope, cm["reply"])] == "reply_to"
        and thread[comment_item(scope, cm["reply2"])] == "reply_to"
    )
    assert thread[issue_item(scope, i["epic"])] == "comment_on"

    [res] = env.resources(cid).values()
    assert res["provider_cursor"] and res["resource_type"] == "linear_team"
    assert res["provider_metadata"]["health"]["objects_synced"] == 24


def test_the_next_scheduled_cycle_applies_exactly_the_changes_and_deletions(env: LinearEnv) -> None:
    fake = env.fake
    s = seed_workspace(fake, key="lin_api_incremental_secret", filler=0)
    env.secrets.append(s.key)
    scope, i, cm = "acme-inc", s.issues, s.comments
    cid = env.create(scope, {"access_token": s.key})["connector_id"]
    env.configure_teams(cid, [s.team])
    first = wait_cycles(env.c, cid, 1)
    assert first["documents_dispatched"] == 7 + 4
    cursor = env.resources(cid)[s.team]["provider_cursor"]  # the first window's end
    wait_indexed(env.c, DB, [issue_item(scope, i["child2"]), comment_item(scope, cm["reply2"])])

    fake.clear_calls()
    fake.edit_issue(i["blocker"], description="Rehearsed on Tuesday: failover took 40 seconds.")
    reply = fake.add_comment(i["child"], "Fonts moved to the new bucket.", user=s.user)
    new = fake.add_issue(s.team, "Decommission the old cluster", "After the cut-over.", creator=s.user)
    fake.archive_issue(i["child2"])  # archived: removed here
    fake.trash_issue(i["dupe"])  # deleted in Linear (to the trash): removed here
    fake.delete_comment(cm["reply2"])  # deleted for good: reconcile notices
    r = env.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 2})
    assert r.status_code == 200
    after = wait_cycles(env.c, cid, 2)  # the scheduler runs it: no manual trigger
    calls = list(fake.calls)
    assert after["last_run"]["trigger"] == "schedule"
    # the edited issue, the new comment and the new issue: exactly those (the comment bumps its issue's
    # updatedAt, so the issue is read again, but nothing indexed in it changed: not dispatched)
    assert after["documents_dispatched"] == first["documents_dispatched"] + 3
    changed = [issue_item(scope, i["blocker"]), comment_item(scope, reply), issue_item(scope, new)]
    wait_indexed(env.c, DB, changed)
    for gone in (issue_item(scope, i["child2"]), issue_item(scope, i["dupe"]), comment_item(scope, cm["reply2"])):
        assert statuses(env.c, DB, [gone]) == {}, f"{gone} deleted at Linear, deleted here"
    content = env.c.get(
        "/context/inspect", params={"database": DB, "id": issue_item(scope, i["blocker"]), "mode": "content"}
    )
    assert "failover took 40 seconds" in content.text
    window = [c for c in calls if c.operation in ("TeamIssues", "TeamComments")]
    since = window[0].variables["since"]  # later cycles (every 2 s) have later windows
    cycle = [c for c in window if c.variables["since"] == since]
    assert since < cursor, "from the last window's end minus the overlap: not a rescan"
    assert [c.operation for c in cycle] == ["TeamIssues", "TeamComments"], "one page of each: the changes"
    assert all(c.variables["team"] == s.team and c.variables["after"] is None for c in cycle)
    ops = {c.operation for c in calls}
    assert {"ExistingIssues", "ExistingComments", "IssueComments"} <= ops, "reconcile; the archived issue's comments"
    assert {c.authorization for c in calls if c.kind == "graphql"} == {s.key}
    dispatched = after["documents_dispatched"]
    wait_for(lambda: connector(env.c, cid)["sync_cycles_completed"] >= 3, what="a third, idle cycle")
    assert connector(env.c, cid)["documents_dispatched"] == dispatched, "an unchanged team dispatches nothing"
    env.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 3600})


def test_an_access_token_expiring_mid_sync_is_refreshed_and_the_sync_finishes(env: LinearEnv) -> None:
    fake = env.fake
    s = seed_workspace(fake, key="lin_api_expiry_secret", filler=30)
    creds = oauth_pair(env, s)
    created = env.create("acme-expiry", creds)
    assert created["auth_type"] == "oauth"
    cid = created["connector_id"]

    def expire_on_second_page(operation: str, variables: dict[str, Any], header: str) -> None:
        if operation == "TeamIssues" and variables.get("after") and header == f"Bearer {creds['access_token']}":
            fake.expire(creds["access_token"])  # Linear says "not authenticated" from here on

    fake.before_graphql.append(expire_on_second_page)
    start = len(fake.graphql_calls())
    try:
        env.configure_teams(cid, [s.team])
        data = wait_cycles(env.c, cid, 1)
    finally:
        fake.before_graphql.remove(expire_on_second_page)
    assert data["needs_reauth"] is False and data["sync_blocked"] is False and data["last_error"] == ""
    assert data["documents_dispatched"] == 7 + 20 + 4, "every object once: the refused page was read again"
    [refresh] = [c for c in fake.calls_of("refresh_token") if c.form["refresh_token"] == creds["refresh_token"]]
    assert refresh.status == 200
    used = bearers(fake, since=start)
    rotated = used[-1]
    assert rotated != creds["access_token"] and used.count(creds["access_token"]) >= 2
    assert used[used.index(rotated) :] == [rotated] * (len(used) - used.index(rotated)), "the new token from then on"
    env.secrets.append(rotated)


def test_discover_refreshes_an_access_token_revoked_before_its_expires_at(env: LinearEnv) -> None:
    fake = env.fake
    s = seed_workspace(fake, key="lin_api_discover_secret", filler=0)
    creds = oauth_pair(env, s)
    cid = env.create("acme-discover", creds)["connector_id"]
    fake.expire(creds["access_token"])  # dead at Linear while the stored expires_at is an hour away
    start = len(fake.graphql_calls())
    r = env.call("GET", f"/connectors/{cid}/discover")
    assert r.status_code == 200, r.text
    assert s.team in {x["id"] for x in r.json()["data"]["resources"]}
    [refresh] = [c for c in fake.calls_of("refresh_token") if c.form["refresh_token"] == creds["refresh_token"]]
    assert refresh.status == 200
    used = bearers(fake, since=start)
    assert used[0] == creds["access_token"] and used[-1] != creds["access_token"], "retried with the new token"
    env.secrets.append(used[-1])


def test_a_refused_refresh_sets_needs_reauth_and_patch_credentials_syncs_again(env: LinearEnv) -> None:
    fake = env.fake
    s = seed_workspace(fake, key="lin_api_reauth_secret", filler=0)
    creds = oauth_pair(env, s)
    cid = env.create("acme-reauth", creds)["connector_id"]
    env.configure_teams(cid, [s.team])
    synced = wait_cycles(env.c, cid, 1)

    fake.revoke_refresh_tokens()  # the user revoked the app's grant...
    fake.expire(creds["access_token"])  # ...and the access token ran out
    assert env.call("POST", f"/connectors/{cid}/sync").status_code == 202
    data = wait_for(lambda: (d := connector(env.c, cid))["needs_reauth"] and d["sync_status"] == "idle" and d)
    assert data["lifecycle"] == "reconnect" and "invalid_grant" in data["needs_reauth_reason"]
    assert data["needs_reauth_at"] and data["sync_blocked"] is False and data["next_sync_at"]
    assert fake.calls_of("refresh_token")[-1].status == 400

    fresh = oauth_pair(env, s)
    patch = {k: fresh[k] for k in ("access_token", "refresh_token", "expires_at")}
    r = env.call("PATCH", f"/connectors/{cid}", json={"credentials": patch})
    assert r.status_code == 200 and r.json()["data"]["credentials_updated"] is True
    data = connector(env.c, cid)
    assert data["needs_reauth"] is False and data["needs_reauth_reason"] == "" and data["needs_reauth_at"] is None
    new = fake.add_issue(s.team, "Written after the reconnect", "Syncing again.", creator=s.user)
    start = len(fake.graphql_calls())
    assert env.call("POST", f"/connectors/{cid}/sync").status_code == 202
    data = wait_cycles(env.c, cid, synced["sync_cycles_completed"] + 1)
    assert data["needs_reauth"] is False and data["documents_dispatched"] == synced["documents_dispatched"] + 1
    assert set(bearers(fake, since=start)) == {fresh["access_token"]}
    wait_indexed(env.c, DB, [issue_item("acme-reauth", new)])


def test_an_api_key_connector_never_needs_reauth_a_revoked_key_blocks_it(env: LinearEnv) -> None:
    s = seed_workspace(env.fake, key="lin_api_revoked_secret", filler=0)
    env.secrets.append(s.key)
    cid = env.create("acme-revoked", {"access_token": s.key})["connector_id"]
    env.configure_teams(cid, [s.team])
    wait_cycles(env.c, cid, 1)
    env.fake.revoke(s.key)
    refreshes = len(env.fake.calls_of("refresh_token"))
    assert env.call("POST", f"/connectors/{cid}/sync").status_code == 202
    data = wait_for(lambda: (d := connector(env.c, cid))["sync_blocked"] and d)
    assert data["needs_reauth"] is False and "Authentication required" in data["sync_blocked_reason"]
    assert data["lifecycle"] == "reconnect" and data["next_sync_at"] is None
    assert len(env.fake.calls_of("refresh_token")) == refreshes, "an API key is never refreshed"


def test_credentials_never_in_an_answer_or_the_server_log(env: LinearEnv) -> None:
    assert len(env.secrets) >= 5, "runs after the other tests of this module"
    env.assert_no_credential_shown()


def test_the_rotated_refresh_token_survives_a_kill_9(tmp_path: Path) -> None:
    """Rotation is persisted before the new token is used: killed right after it, the restarted server
    refreshes with the rotated refresh token (Linear has already spent the old one)."""
    with FakeLinear() as fake:
        s = seed_workspace(fake, key="lin_api_kill_secret", filler=0)
        fake.add_oauth_client("kill-app", "kill-secret")
        access, refresh = fake.issue_oauth_tokens(s.user, "kill-app", expires_in=3600)
        creds = {
            "access_token": access,
            "refresh_token": refresh,
            "client_id": "kill-app",
            "client_secret": "kill-secret",
            "expires_at": time.time() + 3600,
        }

        def expire_at_first_sync_call(operation: str, variables: dict[str, Any], header: str) -> None:
            if operation == "TeamIssues" and header == f"Bearer {access}":
                fake.expire(access)

        fake.before_graphql.append(expire_at_first_sync_call)
        fake.delay_after_refresh_s = 30.0  # once rotated, every answer hangs: the kill lands right after
        data = tmp_path / "data"
        with ServerProcess(data, env=linear_env(fake)) as srv:
            srv.wait_ready(timeout=120)
            [key] = srv.printed_keys
            with srv.client(key) as c:
                ready_database(c, DB)
                body = {"provider": "linear", "database": DB, "provider_account_scope": "acme", "credentials": creds}
                r = c.post("/connectors", json=body)
                assert r.status_code == 201, r.text
                cid = r.json()["data"]["connector_id"]
                r = c.post(f"/connectors/{cid}/configure", json={"resources": [{"resource_id": s.team}]})
                assert r.status_code == 200, r.text
                wait_for(lambda: any(b != access for b in bearers(fake)), what="a call with the rotated token")
                srv.kill9()
        [first] = fake.calls_of("refresh_token")
        assert first.form["refresh_token"] == refresh and first.status == 200
        [rotated_refresh] = [t for t, grant in fake.refresh_tokens.items() if grant[0] == "kill-app"]
        rotated_access = next(b for b in bearers(fake) if b != access)
        fake.delay_s, fake.delay_after_refresh_s = 0.0, None
        fake.expire(rotated_access)  # the restarted server must refresh again, with the rotated token

        with ServerProcess(data, env=linear_env(fake)) as srv2:
            srv2.wait_ready(timeout=120)
            with srv2.client(key) as c:
                done = wait_cycles(c, cid, 1, timeout=120)
                assert done["needs_reauth"] is False and done["documents_dispatched"] == 7 + 4
        second = fake.calls_of("refresh_token")[1]
        assert second.form["refresh_token"] == rotated_refresh and second.status == 200
        assert len(fake.calls_of("refresh_token")) == 2
        for secret in (access, refresh, rotated_access, rotated_refresh, "kill-secret"):
            assert not any(secret in line for line in srv.lines + srv2.lines)
