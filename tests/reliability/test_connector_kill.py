"""kill -9 in the middle of a connector's first sync: the restarted server resumes from the last stored
checkpoint (not from the top), and every message ends up as exactly one completed item."""

from __future__ import annotations

import time
from pathlib import Path

from tests.fakes.slack_api import FakeSlack
from tests.support.connectors import DB, connector, connector_env, item, ready_database, wait_cycles, wait_for
from tests.support.server import ServerProcess

N = 120
PAGE = 20


def _statuses(client, ids: list[str]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    out: dict[str, str] = {}
    for start in range(0, len(ids), 200):
        r = client.get("/context/status", params={"database": DB, "ids": ",".join(ids[start : start + 200])})
        for s in (r.json().get("data") or {}).get("statuses", []):
            if s.get("indexing_status"):
                out[s["id"]] = s["indexing_status"]
    return out


def test_kill9_mid_first_sync_resumes_from_checkpoint_nothing_lost_or_duplicated(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FakeSlack() as slack:
        slack.add_token("xoxb-kill-secret")
        slack.add_channel("CBIG", "big")
        start = time.time() - 5 * 86400
        stamps = [slack.post("CBIG", f"Message number {i} about release {i % 7}", at=start + i * 60) for i in range(N)]
        ids = [item("CBIG", t, "TKILL") for t in stamps]
        slack.page_limit_cap = PAGE
        slack.delay_s = 0.25  # a slow provider, so the kill lands mid-sync
        env = connector_env(slack, CTXSTORE_CONNECTOR_CHUNK_OBJECTS="40")
        with ServerProcess(data, env=env) as srv:
            srv.wait_ready()
            [key] = srv.printed_keys
            with srv.client(key) as c:
                ready_database(c, DB)
                r = c.post(
                    "/connectors",
                    json={
                        "provider": "slack",
                        "database": DB,
                        "provider_account_scope": "TKILL",
                        "credentials": {"access_token": "xoxb-kill-secret"},
                    },
                )
                cid = r.json()["data"]["connector_id"]
                assert (
                    c.post(f"/connectors/{cid}/configure", json={"resources": [{"resource_id": "CBIG"}]}).status_code
                    == 200
                )
                at_kill = wait_for(
                    lambda: (d := connector(c, cid))["documents_dispatched"] >= 3 * PAGE and d,
                    timeout=120,
                    every=0.05,
                    what="a third of the first sync",
                )
                srv.kill9()
        assert at_kill["documents_dispatched"] < N and at_kill["sync_cycles_completed"] == 0, "killed mid-sync"
        slack.clear_calls()

        with ServerProcess(data, env=env) as srv2:
            srv2.wait_ready()
            with srv2.client(key) as c:
                after = wait_cycles(c, cid, 1, timeout=180)
                first = slack.calls_of("conversations.history")[0]
                assert first.params.get("latest"), "resumed below the stored checkpoint, not from the newest message"
                # Backfill pages (oldest = the lookback start, 30 days back) only for what was left at the kill;
                # the reconcile pass reads the 7-day window on top (oldest = now - 7 days).
                backfill = [
                    h
                    for h in slack.calls_of("conversations.history")
                    if float(h.params["oldest"]) < time.time() - 10 * 86400
                ]
                left = (N - at_kill["documents_dispatched"]) // PAGE
                assert left <= len(backfill) <= left + 2
                # At most the page in flight at the kill is dispatched again (same ids: an upsert, not a copy).
                assert N <= after["documents_dispatched"] <= N + PAGE
                listed = c.post("/context/list", json={"database": DB, "page_size": 500}).json()["data"]
                assert listed["total"] == N and sorted(s["id"] for s in listed["sources"]) == sorted(ids)
                wait_for(
                    lambda: list(_statuses(c, ids).values()).count("completed") == N,
                    timeout=240,
                    every=1,
                    what="every item completed",
                )
                # The schedule survived the restart too: the scheduler keeps running it at its interval.
                slack.delay_s = 0.0
                assert c.patch(f"/connectors/{cid}", json={"sync_interval_seconds": 1}).status_code == 200
                later = wait_cycles(c, cid, after["sync_cycles_completed"] + 2, timeout=60)
                assert (
                    later["last_run"]["trigger"] == "schedule"
                    and later["documents_dispatched"] == after["documents_dispatched"]
                )
