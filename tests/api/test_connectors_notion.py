"""Notion connectors end to end: a real `ctxstore serve` whose Notion provider (notion-client) talks to the fake
Notion API, through HTTP as a client would.

first sync -> searchable -> subgraph walks the page tree and a data source's rows; the fake changes -> the
next *scheduled* sync applies exactly those (calls asserted) and deletions propagate; an unshared page is a
per-resource failure; an OAuth token expiring mid-sync is refreshed and the sync finishes; a refused
refresh -> needs_reauth -> PATCH credentials -> syncing again; the rotated refresh token survives kill -9;
no credential in an answer or the server log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.notion_api import DAY, FakeNotion
from tests.fakes.notion_blocks import para
from tests.fakes.notion_seed import Wiki, seed_wiki
from tests.support.connectors import (
    ConnectorCalls,
    connector,
    ready_database,
    served_database,
    statuses,
    wait_cycles,
    wait_for,
    wait_indexed,
)
from tests.support.server import ServerProcess

DB = "wiki"
TOKEN = "ntn_e2e_integration_secret"
CLIENT, CLIENT_SECRET = "notion-oauth-client", "notion-oauth-client-secret"


def item(scope: str, native_id: str) -> str:
    return f"notion_{scope}_{native_id}"


@dataclass
class NotionEnv(ConnectorCalls):
    srv: ServerProcess
    fake: FakeNotion
    wiki: Wiki
    c: httpx.Client
    secrets: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    def create(self, scope: str, credentials: dict[str, Any], **body: Any) -> str:
        self.secrets += [v for k, v in credentials.items() if k != "expires_at" and k != "client_id"]
        payload = {"provider": "notion", "database": DB, "provider_account_scope": scope, "credentials": credentials}
        return str(self.create_connector({**payload, **body})["connector_id"])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotionEnv]:
    with FakeNotion() as fake:
        fake.add_token(TOKEN)
        fake.add_oauth_client(CLIENT, CLIENT_SECRET)
        wiki = seed_wiki(fake)
        data = tmp_path_factory.mktemp("notion") / "data"
        with served_database(data, fake.server_env(), database=DB, timeout=120) as (srv, c):
            yield NotionEnv(srv, fake, wiki, c, secrets=[TOKEN, CLIENT_SECRET])


def oauth_credentials(fake: FakeNotion, name: str, *, expires_in: float = 3600) -> dict[str, Any]:
    access = fake.add_token(f"ntn_oauth_{name}_access", expires_in=expires_in)
    return {
        "access_token": access,
        "refresh_token": fake.issue_refresh_token(CLIENT),
        "client_id": CLIENT,
        "client_secret": CLIENT_SECRET,
        "expires_at": time.time() + expires_in,
    }


def test_first_sync_is_searchable_and_the_subgraph_walks_pages_and_rows(env: NotionEnv) -> None:
    w, scope = env.wiki, "NA"
    cid = env.create(scope, {"access_token": TOKEN})
    created = connector(env.c, cid)
    assert created["provider"] == "notion" and created["auth_type"] == "api_token"
    found = env.call("GET", f"/connectors/{cid}/discover").json()["data"]["resources"]
    kinds = {r["id"]: r["resource_type"] for r in found}
    assert kinds[w.handbook] == "page" and kinds[w.projects] == "data_source" and w.private not in kinds
    out = env.configure(cid, [{"resource_id": w.handbook, "metadata": {"space": "eng"}}, {"resource_id": w.projects}])
    assert out["configured"] == 2 and out["warnings"] == []

    data = wait_cycles(env.c, cid, 1)
    pages = [w.handbook, w.release, w.hotfix, w.rollback, w.runbook, w.oncall]
    rows = [w.rows["Billing migration"], w.rows["Search revamp"], w.rows["Latency budget"]]
    assert data["documents_dispatched"] == len(pages) + 1 + len(rows) and data["last_error"] == ""
    ids = [item(scope, x) for x in [*pages, w.projects, *rows]]
    wait_indexed(env.c, DB, ids)
    assert statuses(env.c, DB, [item(scope, w.ancient), item(scope, w.rows["Old archive cleanup"])]) == {}

    hits = env.c.post("/query", json={"database": DB, "query": "which day do deploys of the billing service happen"})
    ranked = [c["id"] for c in hits.json()["data"]["chunks"]]
    # The page that answers is among the first two: in this scope of short pages the keyword lane does not
    # normalise by length (the short-text rule), so the long handbook, which names the billing service three
    # times, can come first.
    assert item(scope, w.release) in ranked[:2], ranked
    top = hits.json()["data"]["chunks"][ranked.index(item(scope, w.release))]
    assert top["metadata"]["provider"] == "notion" and top["metadata"]["space"] == "eng"
    extra = top["additional_metadata"]
    assert extra["notion_page_id"] == w.release and extra["notion_parent_id"] == w.handbook
    assert extra["provider_account_scope"] == scope and extra["notion_workspace"] == "Acme Wiki"

    def walk(native_id: str) -> dict[str, dict[str, Any]]:
        r = env.c.get(f"/context/{item(scope, native_id)}/subgraph", params={"database": DB})
        return {m["source_id"]: m for m in r.json()["data"]["sources"]}

    assert {item(scope, x) for x in (w.release, w.runbook, w.oncall)} <= set(walk(w.handbook)), "children"
    assert item(scope, w.hotfix) in walk(w.release) and item(scope, w.rollback) in walk(w.hotfix)
    assert {item(scope, r) for r in rows} <= set(walk(w.projects)), "a data source's rows"
    res = env.resources(cid)
    assert res[w.handbook]["provider_cursor"] and res[w.projects]["provider_cursor"]
    assert res[w.handbook]["resource_type"] == "page" and res[w.projects]["resource_type"] == "data_source"


def test_next_scheduled_sync_applies_exactly_the_changes_and_deletions_propagate(env: NotionEnv) -> None:
    f, scope, now = env.fake, "NB", time.time()
    root = f.add_page("Ops Wiki", [para("Operations knowledge.")], shared=True, at=now - 5 * DAY)
    guide = f.add_page("Deploy Guide", [para("Deploy with the blue green switch.")], parent=root, at=now - 4 * DAY)
    old = f.add_page("Old Guide", [para("Deploy by copying files over FTP.")], parent=root, at=now - 4 * DAY)
    faq = f.add_page("Oncall FAQ", [para("Pages go to the primary first.")], parent=root, at=now - 4 * DAY)
    cid = env.create(scope, {"access_token": TOKEN})
    env.configure(cid, [{"resource_id": root}])
    first = wait_cycles(env.c, cid, 1)
    assert first["documents_dispatched"] == 4
    wait_indexed(env.c, DB, [item(scope, x) for x in (root, guide, old, faq)])

    f.clear_calls()
    f.edit_block(f.block_ids(guide, "paragraph")[0], "Deploy with the blue green switch and a canary stage.")
    new = f.add_page("Escalation Matrix", [para("Escalate to the incident commander after 30 minutes.")], parent=faq)
    f.trash(old)
    r = env.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 2})
    assert r.status_code == 200
    after = wait_cycles(env.c, cid, 2)  # the scheduler runs it: no manual trigger
    env.call("PATCH", f"/connectors/{cid}", json={"sync_interval_seconds": 3600})
    assert after["last_run"]["trigger"] == "schedule"
    assert after["documents_dispatched"] == 4 + 3, "the edited page, the new page, and its parent (a new link)"
    changed = [item(scope, x) for x in (guide, new, faq)]
    wait_indexed(env.c, DB, changed)
    assert statuses(env.c, DB, [item(scope, old)]) == {}, "trashed at Notion, deleted here"
    assert env.resources(cid)[root]["provider_metadata"]["health"]["objects_deleted"] == 1
    content = env.c.get("/context/inspect", params={"database": DB, "id": item(scope, guide), "mode": "content"})
    assert "canary stage" in content.text

    searches = f.calls_of("search")
    assert searches and all(c.body["sort"]["direction"] == "descending" for c in searches)
    read = {c.path.split("/")[3] for c in f.calls_of("blocks.children")}
    assert read == {guide, new, faq}, "only changed pages were read: incremental, not a rescan"
    assert {c.path.rsplit("/", 1)[-1] for c in f.calls_of("pages.retrieve")} == {root, old}, "root check, trash check"
    assert all(c.token == TOKEN for c in f.calls)


def test_an_unshared_page_is_a_resource_failure_and_the_other_resources_go_on(env: NotionEnv) -> None:
    f, w, scope = env.fake, env.wiki, "NC"
    team = f.add_page("Team Directory", [para("Who works on what.")], shared=True, at=time.time() - DAY)
    cid = env.create(scope, {"access_token": TOKEN})
    env.configure(cid, [{"resource_id": w.design}, {"resource_id": team}])
    assert wait_cycles(env.c, cid, 1)["documents_dispatched"] == 3  # design docs, cache design, team
    f.unshare(w.design)
    joined = f.add_page("New Joiners", [para("Dana joined the search team.")], parent=team)
    r = env.call("POST", f"/connectors/{cid}/sync")
    assert r.status_code == 202
    data = wait_cycles(env.c, cid, 2)
    assert data["sync_blocked"] is False and data["needs_reauth"] is False
    res = env.resources(cid)
    health = res[w.design]["provider_metadata"]["health"]
    assert (
        health["last_status"] == "error"
        and "object_not_found" in res[w.design]["provider_metadata"]["health"]["last_error"]
    )
    assert res[team]["provider_metadata"]["health"]["last_status"] == "ok"
    wait_indexed(env.c, DB, [item(scope, joined)])
    assert statuses(env.c, DB, [item(scope, w.cache)]) != {}, "nothing deleted: the page is unshared, not gone"


def test_a_token_expiring_mid_sync_is_refreshed_and_the_sync_finishes(env: NotionEnv) -> None:
    f, scope = env.fake, "ND"
    root = f.add_page("OAuth Wiki", [para("Public integration content.")], shared=True, at=time.time() - DAY)
    kids = [
        f.add_page(f"Chapter {i}", [para(f"Chapter {i} text.")], parent=root, at=time.time() - DAY) for i in range(14)
    ]
    creds = oauth_credentials(f, "mid")
    cid = env.create(scope, creds)
    assert connector(env.c, cid)["auth_type"] == "oauth"
    f.clear_calls()
    f.expire_after(creds["access_token"], 12)  # expires part-way through the crawl
    env.configure(cid, [{"resource_id": root}])
    data = wait_cycles(env.c, cid, 1)
    assert data["documents_dispatched"] == 1 + len(kids) and data["needs_reauth"] is False and data["last_error"] == ""
    [rotation] = f.calls_of("oauth.token")
    assert rotation.body["refresh_token"] == creds["refresh_token"] and rotation.basic == (CLIENT, CLIENT_SECRET)
    later = [c.token for c in f.calls if c.at > rotation.at and c.route != "oauth.token"]
    assert later and all(t and t.startswith("ntn_oauth_rotated_") for t in later), "the new token is used"
    assert any(c.token == creds["access_token"] and c.at < rotation.at for c in f.calls_of("blocks.children"))
    env.secrets += [t for t in set(later) if t]


def test_discover_and_configure_probes_refresh_a_token_that_died_before_its_expires_at(env: NotionEnv) -> None:
    """Notion gives no expiry: a 401 is the only signal, so discover and configure's probes refresh once, like a
    sync, instead of answering "rejected the credentials"."""
    f, scope = env.fake, "NT"
    root = f.add_page("Refresh Wiki", [para("Reachable after a refresh.")], shared=True, at=time.time() - DAY)
    creds = oauth_credentials(f, "early")
    cid = env.create(scope, creds)
    f.expire(creds["access_token"])  # revoked at Notion while the stored expires_at is an hour away
    f.clear_calls()
    r = env.call("GET", f"/connectors/{cid}/discover")
    assert r.status_code == 200, r.text
    assert root in {x["id"] for x in r.json()["data"]["resources"]}
    [rotation] = f.calls_of("oauth.token")
    assert rotation.body["refresh_token"] == creds["refresh_token"]
    rotated = {c.token for c in f.calls if c.at > rotation.at and c.route != "oauth.token"}
    assert len(rotated) == 1 and next(iter(rotated), "").startswith("ntn_oauth_rotated_")
    env.secrets += [t for t in rotated if t]
    discover_calls = sum(1 for c in f.calls if c.at > rotation.at)

    # configure: its discover still answers, then the token dies before the probe of the page
    f.clear_calls()
    f.expire_after(next(iter(rotated), ""), discover_calls)
    data = env.configure(cid, [{"resource_id": root}])
    assert data["warnings"] == [] and data["configured"] == 1
    assert [c.route for c in f.calls].count("oauth.token") == 1
    probes = [c for c in f.calls if c.route == "pages.retrieve"]
    assert probes[-1].token != probes[0].token, "the probe ran again with the refreshed token"
    assert env.resources(cid)[root]["name"] == "Refresh Wiki"
    assert connector(env.c, cid)["needs_reauth"] is False


def test_a_refused_refresh_sets_needs_reauth_and_patch_credentials_syncs_again(env: NotionEnv) -> None:
    f, scope = env.fake, "NE"
    root = f.add_page("Reauth Wiki", [para("Before the grant was revoked.")], shared=True, at=time.time() - DAY)
    creds = oauth_credentials(f, "reauth")
    cid = env.create(scope, creds)
    env.configure(cid, [{"resource_id": root}])
    wait_cycles(env.c, cid, 1)
    f.revoke_refresh_tokens()  # the user removed the connection: the grant is dead
    f.expire(creds["access_token"])
    env.call("POST", f"/connectors/{cid}/sync")
    data = wait_for(lambda: (d := connector(env.c, cid))["needs_reauth"] and d["sync_status"] == "idle" and d)
    assert data["lifecycle"] == "reconnect" and "invalid_grant" in data["needs_reauth_reason"]
    assert data["needs_reauth_at"] and data["sync_blocked"] is False

    fresh = oauth_credentials(f, "reconnected")
    env.secrets += [fresh["access_token"], fresh["refresh_token"]]
    patch = {k: fresh[k] for k in ("access_token", "refresh_token", "expires_at")}
    r = env.call("PATCH", f"/connectors/{cid}", json={"credentials": patch})
    assert r.status_code == 200 and r.json()["data"]["credentials_updated"] is True
    assert connector(env.c, cid)["needs_reauth"] is False
    added = f.add_page("After Reconnect", [para("Synced again after the reconnect.")], parent=root)
    cycles = connector(env.c, cid)["sync_cycles_completed"]
    assert env.call("POST", f"/connectors/{cid}/sync").status_code == 202
    data = wait_cycles(env.c, cid, cycles + 1)
    assert data["needs_reauth"] is False and data["last_error"] == ""
    wait_indexed(env.c, DB, [item(scope, added)])


def test_a_revoked_integration_secret_blocks_the_connector_and_never_sets_needs_reauth(env: NotionEnv) -> None:
    f, scope = env.fake, "NR"
    secret = f.add_token("ntn_revocable_integration_secret")
    root = f.add_page("Revocable", [para("Shared for a while.")], shared=True, at=time.time() - DAY)
    cid = env.create(scope, {"access_token": secret})
    env.configure(cid, [{"resource_id": root}])
    wait_cycles(env.c, cid, 1)
    f.revoke(secret)
    env.call("POST", f"/connectors/{cid}/sync")
    data = wait_for(lambda: (d := connector(env.c, cid))["sync_blocked"] and d, what="sync_blocked")
    assert data["needs_reauth"] is False and data["lifecycle"] == "reconnect"
    assert "unauthorized" in data["sync_blocked_reason"] and data["next_sync_at"] is None


def test_credentials_never_in_an_answer_or_the_server_log(env: NotionEnv) -> None:
    assert len(env.secrets) > 4, "runs after the other tests of this module"
    env.assert_no_credential_shown()


def test_a_rotated_refresh_token_survives_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FakeNotion() as f:
        f.add_oauth_client(CLIENT, CLIENT_SECRET)
        root = f.add_page("Kill Wiki", [para("Rotation must survive a crash.")], shared=True, at=time.time() - DAY)
        creds = oauth_credentials(f, "kill", expires_in=60)  # within the refresh skew: rotated before the first call
        with ServerProcess(data, env=f.server_env()) as srv:
            srv.wait_ready(timeout=120)
            [key] = srv.printed_keys
            with srv.client(key) as c:
                ready_database(c, DB)
                body = {"provider": "notion", "database": DB, "provider_account_scope": "NK", "credentials": creds}
                cid = c.post("/connectors", json=body).json()["data"]["connector_id"]
                c.post(f"/connectors/{cid}/configure", json={"resources": [{"resource_id": root}]})
                wait_cycles(c, cid, 1)
                srv.kill9()
        [first] = f.calls_of("oauth.token")
        assert first.body["refresh_token"] == creds["refresh_token"]
        [rotated_refresh] = list(f.refresh_tokens)  # the one Notion handed back (the old one is spent)
        for token in list(f.tokens):
            f.expire(token)  # every access token is dead: the restarted server must refresh
        added = f.add_page("After The Crash", [para("Synced with the persisted refresh token.")], parent=root)
        with ServerProcess(data, env=f.server_env()) as srv2:
            srv2.wait_ready(timeout=120)
            with srv2.client(key) as c:
                assert c.post(f"/connectors/{cid}/sync").status_code == 202
                after = wait_cycles(c, cid, 2)
                assert after["needs_reauth"] is False and after["last_error"] == ""
                second = f.calls_of("oauth.token")[1]
                assert second.body["refresh_token"] == rotated_refresh, "the rotated refresh token was persisted"
                wait_indexed(c, DB, [item("NK", added)])
