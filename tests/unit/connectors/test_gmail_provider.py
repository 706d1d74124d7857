"""The Gmail provider through the real google-api-python-client and google-auth against the loopback fake."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore.connectors.gmail.provider import build_provider
from ctxstore.ports.connector_provider import (
    AccountInfo,
    Checkpoint,
    ConnectorProvider,
    CredentialsRejected,
    DeletedObject,
    KnownObject,
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
from tests.fakes.gmail_api import BOB, OWNER, FakeGmail, Mailbox, compose, seed_mailbox
from tests.support.provider_context import ContextRecorder

DAY = 86400.0
TOKEN = "ya29.unit-secret"


@pytest.fixture
def fake() -> Iterator[FakeGmail]:
    with FakeGmail() as server:
        server.add_token(TOKEN)
        yield server


@pytest.fixture
def box(fake: FakeGmail) -> Mailbox:
    return seed_mailbox(fake)


@pytest.fixture
def provider() -> ConnectorProvider:
    return build_provider()


@pytest.fixture
def harness(fake: FakeGmail) -> ContextRecorder:
    account = AccountInfo("", fake.email_address, {"account_email": fake.email_address})
    return ContextRecorder(fake.base_url, fake.token_url, {"access_token": TOKEN}, auth_type="oauth", account=account)


def request(checkpoint: dict[str, Any] | None, label: str = "INBOX", start: float | None = None) -> SyncRequest:
    return SyncRequest(label, "label", checkpoint, start if start is not None else time.time() - 30 * DAY)


def run(provider: ConnectorProvider, ctx: ProviderContext, req: SyncRequest) -> list[SyncEvent]:
    return list(provider.sync(ctx, req))


def objects(events: list[SyncEvent]) -> dict[str, SyncedObject]:
    return {e.native_id: e for e in events if isinstance(e, SyncedObject)}


def deleted(events: list[SyncEvent]) -> set[str]:
    return {e.native_id for e in events if isinstance(e, DeletedObject)}


def last(events: list[SyncEvent]) -> Checkpoint:
    assert isinstance(events[-1], Checkpoint), "a sync ends with a checkpoint"
    return events[-1]


# ---- account and discovery ---------------------------------------------------------------------------


def test_account_is_the_mailbox_with_an_empty_scope(
    fake: FakeGmail, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    account = provider.account(harness.ctx())
    assert account.account_scope == "" and account.account_name == "owner@example.com"
    assert account.details == {"account_email": "owner@example.com"}
    [call] = fake.calls_of("getProfile")
    assert call.token == TOKEN and call.path == "/gmail/v1/users/me/profile"


def test_discover_lists_labels_system_first_and_pages_when_asked(
    fake: FakeGmail, box: Mailbox, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    page = provider.discover(harness.ctx())
    ids = [r.resource_id for r in page.resources]
    assert ids[:2] == ["INBOX", "SENT"] and ids[-2:] == [box.invoices_label, box.project_label]
    assert {r.resource_type for r in page.resources} == {"label"} and page.next_cursor is None
    first = provider.discover(harness.ctx(), limit=4)
    rest = provider.discover(harness.ctx(), cursor=first.next_cursor, limit=100)
    assert [r.resource_id for r in first.resources + rest.resources] == ids and rest.next_cursor is None


# ---- first sync ----------------------------------------------------------------------------------------


def test_first_sync_is_bounded_by_the_lookback_and_maps_threads_bodies_and_attachments(
    fake: FakeGmail, box: Mailbox, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    start = time.time() - 30 * DAY
    events = run(provider, harness.ctx(), request(None, start=start))
    got = objects(events)
    assert set(got) == set(box.inbox), "INBOX within the lookback: not the 60-day-old mail, not SENT-only"

    root, reply, deeper = got[box.thread_root], got[box.reply], got[box.reply_to_reply]
    assert {root.thread_native_id, reply.thread_native_id, deeper.thread_native_id} == {box.thread_root}
    assert root.parent_native_id is None and root.links == ()
    assert reply.parent_native_id == box.thread_root and [(x.native_id, x.relation) for x in reply.links] == [
        (box.thread_root, "reply_to")
    ]
    assert deeper.parent_native_id == box.reply, "In-Reply-To names the reply, not the root"
    assert root.kind == "email" and root.title == "Falcon launch plan" and "Marketing owns" in root.text
    assert root.native_fields["gmail_from"] == "alice@example.com" and root.url and box.thread_root in root.url
    assert root.native_fields["gmail_thread_id"] == box.thread_root and root.author and "Alice" in root.author

    html = got[box.html_only].text
    assert "observability initiative ships" in html and "Quarterly roadmap" in html
    assert "track()" not in html and "color" not in html and "<b>" not in html
    alternative = got[box.alternative].text
    assert "Pier 39" in alternative and "HTML loses" not in alternative, "text/plain wins in multipart/alternative"

    files = got[box.attachments]
    assert [a.filename for a in files.attachments] == ["invoice-october.pdf", "contract.docx", "usage.csv"]
    assert files.attachments[0].data.startswith(b"%PDF") and b"compute,731" in files.attachments[2].data
    assert "logs.zip" in files.text, "a rejected format is named, not downloaded"
    assert len(fake.calls_of("attachments.get")) == 3

    cp = last(events)
    assert cp.has_more is False and cp.state["phase"] == "incremental" and cp.cursor == cp.state["history_id"]
    [listing] = fake.calls_of("messages.list")
    assert listing.params["labelIds"] == ["INBOX"] and listing.param("q") == f"after:{int(start)}"
    assert len(fake.calls_of("threads.get")) == 4, "one call per thread on the page, not per message"
    assert fake.calls_of("getProfile"), "the history cursor is taken before the listing"


def test_a_paged_first_sync_checkpoints_each_page_and_resumes_without_repeats(
    fake: FakeGmail, box: Mailbox, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.max_results_cap = 2
    events = run(provider, harness.ctx(), request(None))
    checkpoints = [e for e in events if isinstance(e, Checkpoint)]
    assert [c.has_more for c in checkpoints] == [True, True, False]
    resumed = run(provider, harness.ctx(), request(checkpoints[0].state))
    before = [e.native_id for e in events[: events.index(checkpoints[0])] if isinstance(e, SyncedObject)]
    after = [e.native_id for e in resumed if isinstance(e, SyncedObject)]
    assert sorted(before + after) == sorted(box.inbox) and not set(before) & set(after)


# ---- incremental -----------------------------------------------------------------------------------------


def test_later_syncs_read_history_only_and_apply_adds_deletions_and_label_changes(
    fake: FakeGmail, box: Mailbox, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    first = last(run(provider, harness.ctx(), request(None)))
    fake.clear_calls()
    root_rfc = fake.message_id_header(box.thread_root)
    late = fake.deliver(
        compose(subject="Re: Falcon launch plan", sender=BOB, to=OWNER, text="Late reply", in_reply_to=root_rfc),
        thread_of=box.thread_root,
    )
    fake.delete(box.alternative)
    fake.remove_labels(box.html_only, "INBOX")  # archived
    fake.add_labels(box.too_old, "STARRED")  # another label changed: nothing to do for INBOX
    fake.add_labels(box.reply, "TRASH")  # trashed: it leaves INBOX (and every label)

    events = run(provider, harness.ctx(), request(first.state))
    assert set(objects(events)) == {late} and objects(events)[late].parent_native_id == box.thread_root
    assert deleted(events) == {box.alternative, box.html_only, box.reply}
    assert not fake.calls_of("messages.list"), "incremental: no listing"
    [history] = fake.calls_of("history.list")
    assert history.param("startHistoryId") == first.state["history_id"] and history.param("labelId") == "INBOX"
    assert set(history.params["historyTypes"]) == {"messageAdded", "messageDeleted", "labelAdded", "labelRemoved"}
    cp = last(events)
    assert int(cp.state["history_id"]) == fake.history_id and cp.has_more is False

    fake.clear_calls()
    idle = run(provider, harness.ctx(), request(cp.state))
    assert idle == [Checkpoint({**cp.state}, cursor=cp.cursor, has_more=False)]
    assert [c.method for c in fake.calls] == ["history.list"], "an idle label costs one call"
    assert provider.reconcile(harness.ctx(), request(cp.state), since=None, known=[]) is None


def test_a_message_labelled_later_joins_the_label_resource(
    fake: FakeGmail, box: Mailbox, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    first = last(run(provider, harness.ctx(), request(None, label=box.project_label)))
    fake.add_labels(box.html_only, box.project_label)
    events = run(provider, harness.ctx(), request(first.state, label=box.project_label))
    assert set(objects(events)) == {box.html_only}


def test_a_history_gap_resyncs_the_lookback_and_reconciles_once(
    fake: FakeGmail, box: Mailbox, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    first = last(run(provider, harness.ctx(), request(None)))
    fake.delete(box.alternative)
    fake.expire_history()  # the stored historyId is now older than the kept history: 404
    fake.clear_calls()
    events = run(provider, harness.ctx(), request(first.state, start=0.0))
    [gap] = fake.calls_of("history.list")
    assert gap.param("startHistoryId") == first.state["history_id"]
    [listing] = fake.calls_of("messages.list")
    assert abs(float(str(listing.param("q"))[6:]) - (time.time() - 30 * DAY)) < 120, "the lookback, from now"
    assert set(objects(events)) == set(box.inbox) - {box.alternative}
    cp = last(events)
    assert cp.state["reconcile"] is True and int(cp.state["history_id"]) == fake.history_id

    known = [KnownObject(i, None, time.time() - 5 * DAY) for i in [*box.inbox, "gone-meanwhile"]]
    present = provider.reconcile(harness.ctx(), request(cp.state), since=None, known=known)
    assert present is not None and set(known_id.native_id for known_id in known) - set(present) == {
        box.alternative,
        "gone-meanwhile",
    }
    after = last(run(provider, harness.ctx(), request(cp.state)))
    assert after.state["reconcile"] is False, "the next pass switches the listing off"


# ---- errors ------------------------------------------------------------------------------------------------


def test_an_expired_or_refused_token_is_token_expired(
    fake: FakeGmail, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.expire(TOKEN)
    with pytest.raises(TokenExpired):
        provider.account(harness.ctx())
    fake.clear_calls()
    past = {"access_token": fake.add_token("ya29.other"), "expires_at": time.time() - 10}
    with pytest.raises(TokenExpired):
        provider.account(harness.ctx(past))
    assert fake.calls == [], "google-auth saw the expiry: no request with a dead token"


def test_missing_scope_and_an_unprovisioned_mailbox_are_credentials_rejected(
    fake: FakeGmail, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    narrow = fake.add_token("ya29.narrow", scopes=frozenset({"openid"}))
    with pytest.raises(CredentialsRejected, match="insufficient authentication scopes"):
        provider.discover(harness.ctx({"access_token": narrow}))
    fake.mail_disabled = True
    with pytest.raises(CredentialsRejected, match="Mail service not enabled"):
        provider.account(harness.ctx())


def test_quota_errors_are_waited_within_bound_else_rate_limited(
    fake: FakeGmail, box: Mailbox, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.fail("messages.list", status=429, retry_after=2)
    fake.fail("threads.get", status=403, reason="userRateLimitExceeded", message="User-rate limit exceeded")
    assert set(objects(run(provider, harness.ctx(max_wait_s=10), request(None)))) == set(box.inbox)
    assert harness.sleeps == [2.0, 1.0], "Retry-After, then exponential backoff from 1 s"
    harness.sleeps.clear()
    fake.fail("history.list", status=403, reason="rateLimitExceeded", times=10)
    with pytest.raises(RateLimited) as caught:
        run(provider, harness.ctx(max_wait_s=3), request({"v": 1, "phase": "incremental", "history_id": "1"}))
    assert harness.sleeps == [1.0, 2.0] and caught.value.retry_after_s == 60, "a per-minute quota: a minute"
    fake.fail("messages.list", status=429, retry_after=30)
    with pytest.raises(RateLimited) as caught:
        provider.probe(harness.ctx(max_wait_s=3), request(None))
    assert caught.value.retry_after_s == 30


def test_server_errors_retry_briefly_then_are_transient_and_a_missing_label_is_per_resource(
    fake: FakeGmail, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    fake.fail("labels.list", status=503, reason="backendError", times=2)
    assert provider.discover(harness.ctx()).resources
    fake.fail("labels.list", status=500, reason="backendError", times=3)
    with pytest.raises(TransientProviderError):
        provider.discover(harness.ctx())
    with pytest.raises(ResourceUnavailable, match="Invalid label"):
        run(provider, harness.ctx(), request(None, label="Label_gone"))


# ---- OAuth refresh through google-auth ---------------------------------------------------------------------------


def oauth(fake: FakeGmail) -> dict[str, Any]:
    fake.add_oauth_client("client-1.apps.googleusercontent.com", "client-secret")
    return {
        "access_token": TOKEN,
        "refresh_token": fake.issue_refresh_token("client-1.apps.googleusercontent.com"),
        "client_id": "client-1.apps.googleusercontent.com",
        "client_secret": "client-secret",
        "expires_at": time.time() + 30,
    }


def test_refresh_returns_the_whole_set_with_the_rotated_refresh_token(
    fake: FakeGmail, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = oauth(fake)
    fake.rotate_refresh_tokens = True
    rotated = provider.refresh(harness.ctx(creds))
    assert rotated["access_token"].startswith("ya29.issued-") and rotated["refresh_token"] != creds["refresh_token"]
    assert abs(rotated["expires_at"] - (time.time() + fake.access_token_lifetime_s)) < 30
    assert rotated["client_id"] == creds["client_id"] and rotated["client_secret"] == "client-secret"
    [call] = fake.calls_of("token")
    assert call.param("grant_type") == "refresh_token" and call.param("refresh_token") == creds["refresh_token"]
    fake.rotate_refresh_tokens = False
    again = provider.refresh(harness.ctx(rotated))
    assert again["refresh_token"] == rotated["refresh_token"], "no rotation: the stored one stays"
    assert provider.account(harness.ctx(again)).account_name == fake.email_address


def test_a_refused_grant_is_refresh_rejected_a_bad_client_is_credentials_rejected(
    fake: FakeGmail, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = oauth(fake)
    fake.revoke_refresh_tokens()
    with pytest.raises(RefreshRejected, match="invalid_grant"):
        provider.refresh(harness.ctx(creds))
    with pytest.raises(CredentialsRejected, match="invalid_client"):
        provider.refresh(harness.ctx({**creds, "client_secret": "wrong"}))


def test_a_token_endpoint_outage_is_transient(
    fake: FakeGmail, harness: ContextRecorder, provider: ConnectorProvider
) -> None:
    creds = oauth(fake)
    fake.fail("token", status=503, reason="backendError", times=3)  # google-auth tries three times
    with pytest.raises(TransientProviderError):
        provider.refresh(harness.ctx(creds))


# ---- credentials and catalogue ---------------------------------------------------------------------------------


def test_validate_credentials(provider: ConnectorProvider) -> None:
    good = {"access_token": "ya29.a", "refresh_token": "1//r", "client_id": "c", "client_secret": "s"}
    assert provider.validate_credentials("oauth", {**good, "expires_at": 5}) == {**good, "expires_at": 5.0}
    for bad, message in (
        ({**good, "refresh_token": ""}, "refresh_token"),
        ({k: v for k, v in good.items() if k != "client_secret"}, "client_secret"),
        ({**good, "expires_at": "soon"}, "expires_at"),
        ({**good, "token_uri": "http://evil"}, "token_uri"),
    ):
        with pytest.raises(ValueError, match=message):
            provider.validate_credentials("oauth", bad)
    with pytest.raises(ValueError, match="oauth"):
        provider.validate_credentials("api_token", {"access_token": "x"})
    assert provider.info.auth_types == ("oauth",) and provider.info.reconcile_window_s is None


def test_the_catalogue_does_not_import_the_google_clients() -> None:
    code = (
        "import sys, ctxstore.connectors.gmail.provider as g; p = g.build_provider(); "
        "p.validate_credentials('oauth', {'access_token': 'a', 'refresh_token': 'b', 'client_id': 'c',"
        " 'client_secret': 'd'}); print(sorted(m for m in sys.modules if m.startswith(('googleapicl', 'httplib2'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
