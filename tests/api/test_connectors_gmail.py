"""Gmail connectors end to end: a real `ctxstore serve` whose Gmail provider (google-api-python-client, google-auth)
talks to the fake Gmail API and its token endpoint.

first sync -> items (and attachment items) completed, found by /query, a thread walked by the subgraph read;
changes at the fake -> the next scheduled sync reads history only and applies exactly those (a message that
leaves one synced label but stays in another keeps its item); a history gap -> bounded resync whose
reconcile finds the deletion; a token that dies mid-sync -> refreshed and finished; a rotated refresh token
survives kill -9; a refused refresh -> needs_reauth -> PATCH credentials -> syncing again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.gmail_api import ALICE, BOB, OWNER, FakeGmail, compose, seed_mailbox
from tests.support.connectors import (
    DB,
    connector,
    fast_scheduler_env,
    served_database,
    statuses,
    wait_cycles,
    wait_for,
    wait_indexed,
)
from tests.support.server import ServerProcess

CLIENT, SECRET = "client-e2e.apps.googleusercontent.com", "gmail-client-secret"
DAY = 86400.0


def gmail_env(fake: FakeGmail) -> dict[str, str]:
    return fast_scheduler_env(
        CTXSTORE_CONNECTOR_BASE_URL_GMAIL=fake.base_url, CTXSTORE_CONNECTOR_TOKEN_URL_GMAIL=fake.token_url
    )


@dataclass
class Env:
    srv: ServerProcess
    fake: FakeGmail
    c: httpx.Client
    data_dir: Path
    secrets: list[str] = field(default_factory=list)

    def credentials(self, *, expires_in: float = 3600) -> dict[str, Any]:
        self.fake.add_oauth_client(CLIENT, SECRET)
        creds = {
            "access_token": self.fake.add_token(f"ya29.e2e-{uuid.uuid4().hex[:8]}-secret", expires_in=expires_in),
            "refresh_token": self.fake.issue_refresh_token(CLIENT),
            "client_id": CLIENT,
            "client_secret": SECRET,
            "expires_at": time.time() + expires_in,
        }
        self.secrets += [creds["access_token"], creds["refresh_token"], SECRET]
        return creds

    def create(self, c: httpx.Client, scope: str | None, **creds: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"provider": "gmail", "database": DB, "credentials": creds or self.credentials()}
        if scope is not None:
            body["provider_account_scope"] = scope
        r = c.post("/connectors", json=body)
        assert r.status_code == 201, r.text
        data: dict[str, Any] = r.json()["data"]
        return data


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    data_dir = tmp_path_factory.mktemp("gmail") / "data"
    with FakeGmail() as fake, served_database(data_dir, gmail_env(fake), timeout=120) as (srv, c):
        yield Env(srv, fake, c, data_dir)


def configure(c: httpx.Client, cid: str, resources: list[dict[str, Any]]) -> dict[str, Any]:
    r = c.post(f"/connectors/{cid}/configure", json={"resources": resources})
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


def gone(c: httpx.Client, ids: list[str]) -> bool:
    return statuses(c, DB, ids) == {}


def label_with_mail(fake: FakeGmail, label: str, n: int) -> list[str]:
    fake.add_label(label, label.replace("Label_", "").title())
    return [
        fake.deliver(
            compose(
                subject=f"{label} note {i}",
                sender=BOB,
                to=OWNER,
                text=f"Note {i} about {label} budget.",
                at=time.time() - DAY + i,
            ),
            labels=(label,),
        )
        for i in range(n)
    ]


def test_first_sync_searchable_subgraph_then_history_applies_exactly_the_changes(env: Env) -> None:
    fake, c = env.fake, env.c
    box = seed_mailbox(fake)
    created = env.create(c, None)
    cid = created["connector_id"]
    assert created["provider_account_scope"] == "" and created["auth_type"] == "oauth"
    found = {r["id"]: r for r in c.get(f"/connectors/{cid}/discover").json()["data"]["resources"]}
    assert found["INBOX"]["resource_type"] == "label" and found[box.project_label]["name"] == "Project Falcon"
    out = configure(c, cid, [{"resource_id": "INBOX"}, {"resource_id": box.project_label, "metadata": {"p": "f"}}])
    assert out["warnings"] == [] and out["backfill"] is True

    first = wait_cycles(c, cid, 1)
    assert first["last_error"] == "" and first["documents_dispatched"] == 6 + 3, "INBOX, then the Project thread"
    mail = [f"gmail_{m}" for m in box.inbox]
    files = [f"gmail_{box.attachments}~att{i}" for i in range(3)]  # pdf, docx, csv; the zip is not ingested
    wait_indexed(c, DB, mail + files)
    assert gone(c, [f"gmail_{box.too_old}", f"gmail_{box.sent_reply}", f"gmail_{box.attachments}~att3"])

    hits = c.post("/query", json={"database": DB, "query": "when is the Falcon launch and who owns it"}).json()["data"]
    top = hits["chunks"][0]
    assert top["id"] == f"gmail_{box.thread_root}"
    extra = top["additional_metadata"]
    assert extra["account_email"] == "owner@example.com" and extra["provider_account_scope"] == ""
    assert extra["gmail_thread_id"] == box.thread_root and top["metadata"]["provider"] == "gmail"
    invoice = c.post("/query", json={"database": DB, "query": "invoice total due 4812 euros"}).json()["data"]
    assert files[0] in [h["id"] for h in invoice["chunks"]], "the PDF attachment is parsed and searchable"

    sub = c.get(f"/context/gmail_{box.thread_root}/subgraph", params={"database": DB}).json()["data"]
    members = {m["source_id"] for m in sub["sources"]}
    assert {f"gmail_{box.reply}", f"gmail_{box.reply_to_reply}"} <= members
    deeper = c.get(f"/context/gmail_{box.reply}/subgraph", params={"database": DB}).json()["data"]
    assert f"gmail_{box.reply_to_reply}" in {m["source_id"] for m in deeper["sources"]}

    # Changes at Gmail; the scheduler's next cycle reads history only.
    fake.clear_calls()
    late = fake.deliver(
        compose(
            subject="Re: Falcon launch plan",
            sender=ALICE,
            to=OWNER,
            text="Press release approved by legal.",
            in_reply_to=fake.message_id_header(box.reply_to_reply),
        ),
        labels=("INBOX", box.project_label),
        thread_of=box.thread_root,
    )
    fake.delete(box.alternative)
    fake.remove_labels(box.html_only, "INBOX")  # archived: it was only in INBOX
    fake.remove_labels(box.reply, "INBOX")  # archived, but still in the synced Project label
    assert c.patch(f"/connectors/{cid}", json={"sync_interval_seconds": 2}).status_code == 200
    second = wait_cycles(c, cid, 2)
    assert second["last_run"]["trigger"] == "schedule" and second["last_error"] == ""
    assert second["documents_dispatched"] == first["documents_dispatched"] + 2, "the new reply, in both labels"
    wait_indexed(c, DB, [f"gmail_{late}", f"gmail_{box.reply}"])
    assert gone(c, [f"gmail_{box.alternative}", f"gmail_{box.html_only}"]), "deleted / archived out of INBOX"
    assert not fake.calls_of("messages.list"), "incremental: no listing"
    history = fake.calls_of("history.list")
    assert {h.param("labelId") for h in history} == {"INBOX", box.project_label}
    assert {h.path.rsplit("/", 1)[1] for h in fake.calls_of("threads.get")} <= {box.thread_root, box.html_only}
    late_sub = c.get(f"/context/gmail_{box.reply_to_reply}/subgraph", params={"database": DB}).json()["data"]
    assert f"gmail_{late}" in {m["source_id"] for m in late_sub["sources"]}, "the new reply hangs off its parent"

    idle = wait_cycles(c, cid, second["sync_cycles_completed"] + 1)
    assert idle["documents_dispatched"] == second["documents_dispatched"], "an idle mailbox dispatches nothing"
    c.patch(f"/connectors/{cid}", json={"sync_interval_seconds": 3600})


def test_a_history_gap_resyncs_the_lookback_and_reconciles_the_deletion(env: Env) -> None:
    fake, c = env.fake, env.c
    ids = label_with_mail(fake, "Label_gap", 3)
    cid = env.create(c, "gap")["connector_id"]
    configure(c, cid, [{"resource_id": "Label_gap"}])
    first = wait_cycles(c, cid, 1)
    items = [f"gmail_gap_{m}" for m in ids]
    wait_indexed(c, DB, items)
    [res] = c.get(f"/connectors/{cid}/resources").json()["data"]["resources"]
    cursor = res["provider_cursor"]
    assert cursor and int(cursor) < fake.history_id + 1

    fake.delete(ids[0])
    fake.expire_history()  # the stored historyId is older than the kept history: 404
    fake.clear_calls()
    assert c.post(f"/connectors/{cid}/sync").status_code == 202
    after = wait_cycles(c, cid, first["sync_cycles_completed"] + 1)
    assert after["last_error"] == "" and after["sync_blocked"] is False, "a history gap is not an error"
    [gap] = [h for h in fake.calls_of("history.list") if h.param("labelId") == "Label_gap"]
    assert gap.param("startHistoryId") == cursor
    [listing] = [x for x in fake.calls_of("messages.list") if x.params.get("labelIds") == ["Label_gap"]][:1]
    assert float(str(listing.param("q"))[6:]) >= time.time() - 30 * DAY - 300, "bounded by the lookback"
    wait_for(lambda: gone(c, [items[0]]), what="the message deleted during the gap is deleted here")
    assert statuses(c, DB, items[1:]) == {i: "completed" for i in items[1:]}
    [res] = c.get(f"/connectors/{cid}/resources").json()["data"]["resources"]
    assert int(res["provider_cursor"]) >= fake.history_floor


def test_a_token_that_dies_mid_sync_is_refreshed_and_the_sync_finishes(env: Env) -> None:
    fake, c = env.fake, env.c
    ids = label_with_mail(fake, "Label_mid", 12)
    creds = env.credentials()
    cid = env.create(c, "midsync", **creds)["connector_id"]
    fake.max_results_cap = 3
    try:
        fake.expire_after(creds["access_token"], 8)  # configure's probe and discover, then a few pages
        fake.clear_calls()
        configure(c, cid, [{"resource_id": "Label_mid"}])
        data = wait_cycles(c, cid, 1)
    finally:
        fake.max_results_cap = 500
    assert data["last_error"] == "" and data["needs_reauth"] is False and data["documents_dispatched"] == 12
    [refresh] = fake.calls_of("token")
    assert refresh.param("refresh_token") == creds["refresh_token"]
    used = [x.token for x in fake.calls if x.method == "threads.get"]
    assert used[0] == creds["access_token"] and used[-1] and used[-1].startswith("ya29.issued-"), "refreshed mid-sync"
    env.secrets += [t for t in fake.issued_access_tokens()]
    wait_indexed(c, DB, [f"gmail_midsync_{m}" for m in ids])


def test_a_refused_refresh_sets_needs_reauth_and_patch_credentials_resumes(env: Env) -> None:
    fake, c = env.fake, env.c
    ids = label_with_mail(fake, "Label_reauth", 1)
    creds = env.credentials()
    cid = env.create(c, "reauth", **creds)["connector_id"]
    configure(c, cid, [{"resource_id": "Label_reauth"}])
    first = wait_cycles(c, cid, 1)

    fake.revoke_refresh_tokens()  # the user revoked the app's access
    fake.expire(creds["access_token"])
    assert c.post(f"/connectors/{cid}/sync").status_code == 202
    data = wait_for(
        lambda: (d := connector(c, cid))["needs_reauth"] and d["sync_status"] == "idle" and d, what="reauth"
    )
    assert data["lifecycle"] == "reconnect" and "invalid_grant" in data["needs_reauth_reason"]
    assert data["needs_reauth_at"] and data["sync_blocked"] is False

    fresh = env.credentials()
    fake.email_address = "someone-else@example.com"
    try:
        other = c.patch(f"/connectors/{cid}", json={"credentials": fresh})
    finally:
        fake.email_address = "owner@example.com"
    assert other.status_code == 400 and "someone-else@example.com" in other.json()["error"]["message"]
    assert connector(c, cid)["needs_reauth"] is True, "a refused update changes nothing"
    r = c.patch(f"/connectors/{cid}", json={"credentials": fresh})
    assert r.status_code == 200 and r.json()["data"]["credentials_updated"] is True
    assert connector(c, cid)["needs_reauth"] is False and connector(c, cid)["needs_reauth_reason"] == ""
    new = fake.deliver(
        compose(subject="After reconnecting", sender=BOB, to=OWNER, text="Synced again."), labels=("Label_reauth",)
    )
    assert c.post(f"/connectors/{cid}/sync").status_code == 202
    after = wait_cycles(c, cid, first["sync_cycles_completed"] + 1)
    assert (
        after["needs_reauth"] is False and after["last_error"] == "" and after["lifecycle"] in ("active", "ingesting")
    )
    wait_indexed(c, DB, [f"gmail_reauth_{ids[0]}", f"gmail_reauth_{new}"])


def test_a_rotated_refresh_token_survives_kill9(env: Env) -> None:
    """Runs last in this module: it kills the module's server and restarts it on the same data dir."""
    fake, c = env.fake, env.c
    ids = label_with_mail(fake, "Label_rotate", 1)
    creds = env.credentials(expires_in=60)  # inside the refresh skew: rotated before the first call
    fake.rotate_refresh_tokens = True
    try:
        cid = env.create(c, "rotate", **creds)["connector_id"]
        fake.clear_calls()
        configure(c, cid, [{"resource_id": "Label_rotate"}])
        wait_cycles(c, cid, 1)
        [rotation] = fake.calls_of("token")
        assert rotation.param("refresh_token") == creds["refresh_token"]
        assert creds["refresh_token"] not in fake.refresh_tokens, "single use: the old one is dead now"
        [rotated] = list(fake.refresh_tokens)[-1:]
        env.srv.kill9()
        for token in fake.issued_access_tokens():
            fake.expire(token)
        fake.clear_calls()
        key = str(c.headers["Authorization"]).removeprefix("Bearer ")
        with ServerProcess(env.data_dir, env=gmail_env(fake)) as srv2:
            srv2.wait_ready(timeout=120)
            with srv2.client(key) as c2:
                assert c2.post(f"/connectors/{cid}/sync").status_code == 202
                after = wait_cycles(c2, cid, 2)
                assert after["needs_reauth"] is False and after["last_error"] == ""
                assert [t.param("refresh_token") for t in fake.calls_of("token")] == [rotated]
                wait_indexed(c2, DB, [f"gmail_rotate_{ids[0]}"])
            env.secrets += [rotated, *fake.issued_access_tokens()]
            lines = srv2.lines
    finally:
        fake.rotate_refresh_tokens = False
    for secret in env.secrets:
        assert not any(secret in line for line in lines + env.srv.lines), "a credential reached the server log"
