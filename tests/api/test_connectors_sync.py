"""Connectors end to end: a real `ctxstore serve` whose Slack provider (slack-sdk) talks to the fake Slack API.

create -> discover -> configure -> first sync -> items completed, found by /query, a thread walked by the
subgraph read; changes at the fake -> the next *scheduled* sync applies exactly those (calls asserted);
429 waited out; a refused OAuth refresh -> needs_reauth; a revoked token -> sync_blocked, skipped, cleared
by PATCH credentials; credentials never in an answer or the server log.
"""

from __future__ import annotations

import json
import time

from tests.support.connectors import (
    DB,
    Env,
    connector,
    item,
    statuses,
    wait_cycles,
    wait_for,
    wait_indexed,
)

DAY = 86400.0


def test_first_sync_query_subgraph_and_system_metadata(connector_server: Env) -> None:
    s, now = connector_server.slack, time.time()
    token = s.add_token("xoxb-first-sync-secret")
    s.add_channel("CENG", "eng")
    s.add_channel("CEMPTY", "empty")
    too_old = s.post("CENG", "Ancient history about the billing service", at=now - 40 * DAY)
    parent = s.post("CENG", "Alice deployed the billing service to production", at=now - 3 * DAY)
    r1 = s.post("CENG", "Bob confirmed the invoices render correctly", thread_ts=parent, at=now - 3 * DAY + 60)
    r2 = s.post("CENG", "Carol saw latency drop after the deploy", thread_ts=parent, at=now - 3 * DAY + 120)
    other = s.post("CENG", "Quarterly budget review meeting moved to Friday", at=now - 2 * DAY)

    created = connector_server.create("TENG", token, custom_instructions="Track decisions and owners.")
    cid = created["connector_id"]
    assert created["provider_account_scope"] == "TENG" and created["status"] == "active"
    assert (created["database"], created["tenant_id"], created["collection"], created["sub_tenant_id"]) == (
        DB,
        DB,
        "",
        "",
    )
    assert created["lifecycle"] == "pending_setup" and created["auth_type"] == "api_token"
    assert created["next_sync_at"] and created["sync_interval_seconds"] == 3600

    found = connector_server.call("GET", f"/connectors/{cid}/discover").json()["data"]
    discovered = {r["id"]: r["name"] for r in found["resources"]}
    assert discovered["CEMPTY"] == "empty" and discovered["CENG"] == "eng"
    assert found["next_cursor"] is None and found["has_more"] is False  # paging is opt-in: one whole page

    out = connector_server.configure(
        cid,
        [
            {"resource_id": "CENG", "metadata": {"team": "eng"}, "additional_metadata": {"origin": "e2e"}},
            {"resource_id": "CEMPTY"},
        ],
        lookback_days=30,
    )
    assert out["configured"] == 2 and out["backfill"] is True and out["run_id"]
    assert len(out["warnings"]) == 1 and "CEMPTY" in out["warnings"][0]

    data = wait_cycles(connector_server.c, cid, 1)
    assert data["documents_dispatched"] == 4 and data["resources_pending_first_sync"] == 0
    assert data["active_resource_count"] == 2 and data["last_error"] == ""
    for f in ("first_data_dispatched_at", "first_sync_at", "last_successful_sync_at", "last_attempted_sync_at"):
        assert data[f], f
    ids = [item("CENG", t, "TENG") for t in (parent, r1, r2, other)]
    wait_indexed(connector_server.c, DB, ids)
    wait_for(lambda: connector(connector_server.c, cid)["lifecycle"] == "active", what="lifecycle active")
    assert statuses(connector_server.c, DB, [item("CENG", too_old, "TENG")]) == {}  # older than lookback_days

    hits = connector_server.c.post("/query", json={"database": DB, "query": "who deployed the billing service"}).json()[
        "data"
    ]
    top = hits["chunks"][0]
    assert top["id"] == item("CENG", parent, "TENG")
    meta = top["metadata"]
    assert meta["provider"] == "slack" and meta["connector_id"] == cid and meta["team"] == "eng"
    extra = top["additional_metadata"]
    assert extra["connector_id"] == cid and extra["resource_id"] == "CENG" and extra["provider_account_scope"] == "TENG"
    assert extra["slack_channel"] == "CENG" and extra["origin"] == "e2e"
    assert extra["custom_instructions"] == "Track decisions and owners."

    sub = connector_server.c.get(f"/context/{item('CENG', parent, 'TENG')}/subgraph", params={"database": DB}).json()[
        "data"
    ]
    members = {m["source_id"]: m for m in sub["sources"]}
    assert {item("CENG", r1, "TENG"), item("CENG", r2, "TENG")} <= set(members)
    assert members[item("CENG", r1, "TENG")]["discovered_relation"] in ("reply_to", "child", "same_thread")

    res = connector_server.call("GET", f"/connectors/{cid}/resources").json()["data"]["resources"]
    by_id = {r["resource_id"]: r for r in res}
    assert by_id["CENG"]["provider_cursor"] == other  # the newest top-level ts seen
    assert by_id["CEMPTY"]["provider_cursor"] and by_id["CENG"]["metadata"] == {"team": "eng"}
    assert by_id["CENG"]["provider_metadata"]["health"]["objects_synced"] == 4


def test_next_scheduled_sync_applies_exactly_the_changes_incrementally(connector_server: Env) -> None:
    s, now = connector_server.slack, time.time()
    token = s.add_token("xoxb-incremental-secret")
    s.add_channel("CINC", "incremental")
    parent = s.post("CINC", "Design review of the cache migration", at=now - 4 * DAY)
    s.post("CINC", "Looks fine to me", thread_ts=parent, at=now - 4 * DAY + 30)
    edited = s.post("CINC", "The outage was caused by a bad index", at=now - 2 * DAY)
    doomed = s.post("CINC", "This message will be deleted", at=now - DAY)
    keep = s.post("CINC", "Security audit is scheduled", at=now - DAY + 5)
    cid = connector_server.create("TINC", token)["connector_id"]
    connector_server.configure(cid, [{"resource_id": "CINC"}])
    first = wait_cycles(connector_server.c, cid, 1)
    assert first["documents_dispatched"] == 5
    wait_indexed(connector_server.c, DB, [item("CINC", t, "TINC") for t in (parent, edited, doomed, keep)])

    s.clear_calls()
    new = s.post("CINC", "Hiring plan approved for the platform team")
    s.edit("CINC", edited, "The outage was caused by a missing database index")
    s.delete("CINC", doomed)
    reply = s.post("CINC", "Follow-up: the migration finished overnight", thread_ts=parent)
    r = connector_server.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 2})
    assert r.status_code == 200 and r.json()["data"]["sync_interval_seconds"] == 2
    after = wait_cycles(connector_server.c, cid, 2)  # the scheduler runs it: no manual trigger
    assert after["last_run"]["trigger"] == "schedule"
    assert after["documents_dispatched"] == 5 + 3, "new, edited, old-thread reply: exactly those"
    [res] = connector_server.call("GET", f"/connectors/{cid}/resources").json()["data"]["resources"]
    assert res["provider_metadata"]["health"]["objects_deleted"] == 1
    changed = [item("CINC", t, "TINC") for t in (new, edited, reply)]
    wait_indexed(connector_server.c, DB, changed)
    assert statuses(connector_server.c, DB, [item("CINC", doomed, "TINC")]) == {}, (
        "deleted at the provider, deleted here"
    )
    text = connector_server.c.get(
        "/context/inspect", params={"database": DB, "id": item("CINC", edited, "TINC"), "mode": "content"}
    ).json()["data"]
    assert "missing database index" in json.dumps(text)

    history = s.calls_of("conversations.history")
    assert history, "the scheduled sync read the channel"
    assert all(float(c.params["oldest"]) >= now - 7 * DAY - 60 for c in history), "bounded window, never a rescan"
    assert {c.params["ts"] for c in s.calls_of("conversations.replies")} <= {parent}
    assert all(c.token == token for c in s.calls)
    wait_for(lambda: connector(connector_server.c, cid)["sync_cycles_completed"] >= 3, what="a third, idle cycle")
    assert connector(connector_server.c, cid)["documents_dispatched"] == 8, "an unchanged channel dispatches nothing"
    connector_server.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 3600})


def test_429_is_waited_out_and_the_sync_finishes(connector_server: Env) -> None:
    s = connector_server.slack
    token = s.add_token("xoxb-ratelimit-secret")
    s.add_channel("CRL", "ratelimited")
    s.post("CRL", "Rate limits are part of life", at=time.time() - DAY)
    cid = connector_server.create("TRL", token)["connector_id"]
    s.fail("conversations.history", status=429, retry_after=1, times=2)
    connector_server.configure(cid, [{"resource_id": "CRL"}])
    data = wait_cycles(connector_server.c, cid, 1)
    assert data["last_error"] == "" and data["sync_blocked"] is False and data["documents_dispatched"] == 1
    refused_then_answered = [c for c in s.calls_of("conversations.history") if c.params.get("channel") == "CRL"]
    assert len(refused_then_answered) >= 3
    # Caught up once its one message is indexed (on a loaded machine that can take a while).
    wait_for(lambda: connector(connector_server.c, cid)["lifecycle"] == "active", timeout=120, what="active")
    # A Retry-After beyond CTXSTORE_CONNECTOR_MAX_WAIT_S ends the chunk and reschedules after it, unblocked.
    s.fail("conversations.history", status=429, retry_after=30, times=1)
    r = connector_server.call("POST", f"/connectors/{cid}/sync")
    assert r.status_code == 202 and r.json()["data"]["workflow_id"] == f"connector-sync-{cid}"
    later = wait_for(
        lambda: (d := connector(connector_server.c, cid))["last_error"] and d["sync_status"] == "idle" and d, what="rl"
    )
    assert "rate limited" in later["last_error"] and later["sync_blocked"] is False
    assert later["lifecycle"] == "active"
    next_at = time.mktime(time.strptime(later["next_sync_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert next_at >= time.time() + 15


def test_oauth_rotation_then_refused_refresh_sets_needs_reauth_and_patch_clears_it(connector_server: Env) -> None:
    s = connector_server.slack
    s.add_channel("COA", "oauth")
    s.post("COA", "Rotating tokens every twelve hours", at=time.time() - DAY)
    s.add_oauth_client("client-1", "client-secret-value")
    first_token = s.add_token("xoxe.xoxb-initial-secret", expires_in=60)  # within the refresh skew: rotated at once
    first_refresh = s.issue_refresh_token("client-1")
    connector_server.secrets += [first_refresh, "client-secret-value", first_token]
    creds = {
        "access_token": first_token,
        "refresh_token": first_refresh,
        "client_id": "client-1",
        "client_secret": "client-secret-value",
        "expires_at": time.time() + 60,
    }
    r = connector_server.call(
        "POST",
        "/connectors",
        json={"provider": "slack", "database": DB, "provider_account_scope": "TOA", "credentials": creds},
    )
    assert r.status_code == 201 and r.json()["data"]["auth_type"] == "oauth"
    cid = r.json()["data"]["connector_id"]
    connector_server.configure(cid, [{"resource_id": "COA"}])
    data = wait_cycles(connector_server.c, cid, 1)
    assert data["needs_reauth"] is False and data["documents_dispatched"] == 1
    [rotation] = s.calls_of("oauth.v2.access")
    assert rotation.params["refresh_token"] == first_refresh
    used = {c.token for c in s.calls_of("conversations.history") if c.params.get("channel") == "COA"}
    assert used and all(t and t.startswith("xoxe.xoxb-rotated") for t in used), "the rotated token is used"
    connector_server.secrets += [t for t in used if t]

    # The refresh token is refused (revoked at Slack) while the access token expires: needs_reauth.
    s.revoke_refresh_tokens()
    for t in used:
        if t:
            s.tokens[t].expires_at = time.time() - 1
    connector_server.call("POST", f"/connectors/{cid}/sync")
    data = wait_for(lambda: (d := connector(connector_server.c, cid))["needs_reauth"] and d, what="needs_reauth")
    assert data["lifecycle"] == "reconnect" and "invalid_refresh_token" in data["needs_reauth_reason"]
    assert data["needs_reauth_at"] and data["sync_blocked"] is False

    fresh_refresh = s.issue_refresh_token("client-1")
    fresh_access = s.add_token("xoxe.xoxb-reconnected-secret", expires_in=3600)
    connector_server.secrets += [fresh_refresh, fresh_access]
    patch = {
        "credentials": {"access_token": fresh_access, "refresh_token": fresh_refresh, "expires_at": time.time() + 3600}
    }
    r = connector_server.call("PATCH", f"/connectors/{cid}", json=patch)
    assert r.status_code == 200 and r.json()["data"]["credentials_updated"] is True
    data = connector(connector_server.c, cid)
    assert data["needs_reauth"] is False and data["needs_reauth_reason"] == ""


def test_revoked_token_blocks_the_connector_the_scheduler_skips_it_and_patch_clears_it(connector_server: Env) -> None:
    s = connector_server.slack
    token = s.add_token("xoxb-revoked-secret")
    s.add_channel("CRV", "revoked")
    s.post("CRV", "Before the token was revoked", at=time.time() - DAY)
    cid = connector_server.create("TRV", token)["connector_id"]
    connector_server.configure(cid, [{"resource_id": "CRV"}])
    wait_cycles(connector_server.c, cid, 1)
    connector_server.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 1})
    s.revoke(token)
    data = wait_for(lambda: (d := connector(connector_server.c, cid))["sync_blocked"] and d, what="sync_blocked")
    assert data["lifecycle"] == "reconnect" and "token_revoked" in data["sync_blocked_reason"]
    assert data["next_sync_at"] is None and data["needs_reauth"] is False
    r = connector_server.call("POST", f"/connectors/{cid}/sync")
    assert r.status_code == 409 and r.json()["error"]["code"] == "CONFLICT"
    calls = len([c for c in s.calls if c.token == token])
    time.sleep(2.0)  # several scheduler ticks at a 1 s interval
    assert len([c for c in s.calls if c.token == token]) == calls, "a blocked connector is skipped"

    bad = connector_server.call(
        "PATCH", f"/connectors/{cid}", json={"credentials": {"access_token": "xoxb-not-issued"}}
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_INPUT"
    assert connector(connector_server.c, cid)["sync_blocked"] is True, "a rejected update changes nothing"
    new_token = s.add_token("xoxb-replacement-secret")
    connector_server.secrets.append(new_token)
    s.post("CRV", "After the token was replaced")
    r = connector_server.call("PATCH", f"/connectors/{cid}", json={"credentials": {"access_token": new_token}})
    assert r.status_code == 200 and r.json()["data"]["credentials_updated"] is True
    cycles = data["sync_cycles_completed"]
    data = wait_cycles(connector_server.c, cid, cycles + 1)
    assert data["sync_blocked"] is False and data["lifecycle"] in ("active", "ingesting", "syncing")
    assert data["documents_dispatched"] == 2
    connector_server.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 3600})


def test_one_connector_never_syncs_twice_at_once(connector_server: Env) -> None:
    s = connector_server.slack
    token = s.add_token("xoxb-once-secret")
    s.add_channel("CONCE", "once")
    s.post("CONCE", "Only one sync at a time", at=time.time() - DAY)
    cid = connector_server.create("TONCE", token)["connector_id"]
    s.delay_s = 0.3  # a slow provider keeps the first sync running
    try:
        connector_server.configure(cid, [{"resource_id": "CONCE"}])
        wait_for(lambda: connector(connector_server.c, cid)["sync_status"] == "running", what="running")
        assert connector(connector_server.c, cid)["lifecycle"] == "syncing"
        second = connector_server.call("POST", f"/connectors/{cid}/sync")
        assert second.status_code == 409 and "already queued or running" in second.json()["error"]["message"]
    finally:
        s.delay_s = 0.0
    data = wait_cycles(connector_server.c, cid, 1)
    assert data["documents_dispatched"] == 1


def test_credentials_never_in_an_answer_or_the_server_log(connector_server: Env) -> None:
    assert connector_server.secrets, "runs after the other tests of this module"
    connector_server.assert_no_credential_shown()
