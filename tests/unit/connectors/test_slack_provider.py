"""The Slack provider through the real slack_sdk WebClient against the loopback fake Slack Web API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore.connectors.slack import provider as slack_module
from ctxstore.connectors.slack.provider import THREAD_WINDOW_S, SlackProvider
from ctxstore.ports.connector_provider import (
    Checkpoint,
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
from tests.fakes.slack_api import FakeSlack
from tests.support.provider_context import ContextRecorder

DAY = 86400.0
P = SlackProvider()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_token("xoxb-ok")
        fake.add_channel("C1", "general")
        yield fake


def ctx(slack: FakeSlack, token: str = "xoxb-ok", **kw: Any) -> ProviderContext:
    """Slack's token endpoint is a Web API method, so it lives at the API base."""
    recorder = ContextRecorder(slack.base_url, slack.base_url, sleeps=kw.pop("waits", []))
    credentials = {"access_token": token, **kw.pop("creds", {})}
    return recorder.ctx(credentials, kw.pop("auth_type", None), max_wait_s=kw.pop("max_wait_s", 5.0), http_timeout_s=5)


def request(checkpoint: dict[str, Any] | None = None, *, lookback_days: float = 30) -> SyncRequest:
    return SyncRequest(
        "C1", "channel", checkpoint, time.time() - lookback_days * DAY, resource_metadata={"name": "general"}
    )


def run(slack: FakeSlack, checkpoint: dict[str, Any] | None = None, **kw: Any) -> tuple[list[SyncEvent], Checkpoint]:
    events = list(P.sync(ctx(slack), request(checkpoint, **kw)))
    last = events[-1]
    assert isinstance(last, Checkpoint)
    return events, last


def ids(events: list[SyncEvent]) -> list[str]:
    return [e.native_id for e in events if isinstance(e, SyncedObject)]


def test_account_discover_and_probe(slack: FakeSlack) -> None:
    slack.add_channel("C2", "random", is_private=True)
    slack.add_channel("C3", "empty")
    slack.post("C1", "hello", at=time.time() - DAY)
    acct = P.account(ctx(slack))
    assert acct.account_scope == "T0FAKE" and acct.details["slack_workspace_url"] == "https://fake.slack.com/"
    page = P.discover(ctx(slack))
    assert [(r.resource_id, r.name, r.resource_type) for r in page.resources] == [
        ("C1", "general", "channel"),
        ("C2", "random", "channel"),
        ("C3", "empty", "channel"),
    ]
    assert page.resources[1].metadata["is_private"] is True and page.next_cursor is None
    first = P.discover(ctx(slack), limit=2)  # opt-in paging: one page and a cursor
    assert len(first.resources) == 2 and first.next_cursor
    rest = P.discover(ctx(slack), cursor=first.next_cursor, limit=2)
    assert [r.resource_id for r in rest.resources] == ["C3"] and rest.next_cursor is None
    assert P.probe(ctx(slack), request()) is True
    assert P.probe(ctx(slack), SyncRequest("C3", "channel", None, time.time() - 30 * DAY)) is False


def test_first_sync_is_bounded_by_lookback_pages_with_checkpoints_and_maps_threads(slack: FakeSlack) -> None:
    now = time.time()
    old = slack.post("C1", "too old", at=now - 40 * DAY)
    parent = slack.post("C1", "Alice: the deploy is done", at=now - 10 * DAY)
    reply = slack.post("C1", "Bob: thanks", thread_ts=parent, at=now - 10 * DAY + 60)
    for i in range(7):
        slack.post("C1", f"note {i}", at=now - 5 * DAY + i)
    slack.page_limit_cap = 3
    events, last = run(slack)
    got = ids(events)
    assert f"C1_{old}" not in got
    assert len(got) == len(set(got)) == 9
    checkpoints = [e for e in events if isinstance(e, Checkpoint)]
    assert len(checkpoints) >= 3 and all(c.has_more for c in checkpoints[:-1]) and not last.has_more
    assert last.state["phase"] == "incremental" and last.cursor == max(c.cursor for c in checkpoints)
    by_id = {e.native_id: e for e in events if isinstance(e, SyncedObject)}
    r = by_id[f"C1_{reply}"]
    assert r.thread_native_id == r.parent_native_id == f"C1_{parent}"
    assert [(x.native_id, x.relation) for x in r.links] == [(f"C1_{parent}", "reply_to")]
    p = by_id[f"C1_{parent}"]
    assert p.thread_native_id == f"C1_{parent}" and p.parent_native_id is None
    assert p.url == f"https://fake.slack.com/archives/C1/p{parent.replace('.', '')}" or p.url is None
    assert p.native_fields == {
        "slack_channel": "C1",
        "slack_channel_name": "general",
        "slack_ts": parent,
        "slack_thread_ts": parent,
    }


def test_a_first_sync_resumes_from_any_checkpoint_without_losing_an_object(slack: FakeSlack) -> None:
    now = time.time()
    for i in range(10):
        t = slack.post("C1", f"message {i}", at=now - 3 * DAY + i * 100)
        if i % 4 == 0:
            slack.post("C1", f"reply to {i}", thread_ts=t, at=now - 3 * DAY + i * 100 + 1)
    slack.page_limit_cap = 4
    seen: list[str] = []
    checkpoint: dict[str, Any] | None = None
    rounds = 0
    while True:  # consume one page at a time, as a chunked sync does
        rounds += 1
        gen = P.sync(ctx(slack), request(checkpoint))
        for e in gen:
            if isinstance(e, SyncedObject):
                seen.append(e.native_id)
            if isinstance(e, Checkpoint):
                checkpoint = e.state
                done = not e.has_more
                break
        gen.close()
        if done:
            break
    assert rounds >= 3
    assert len(seen) == len(set(seen)) == 13


def test_incremental_sync_sees_new_edited_and_old_thread_replies_without_rescanning(
    slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    old_parent = slack.post("C1", "an old thread", at=now - 20 * DAY)  # parent older than the window
    slack.post("C1", "a recent reply keeps it watched", thread_ts=old_parent, at=now - 2 * DAY)
    parent = slack.post("C1", "a thread", at=now - 3 * DAY)
    slack.post("C1", "first reply", thread_ts=parent, at=now - 3 * DAY + 10)
    quiet = slack.post("C1", "a thread nobody touches", at=now - 2 * DAY)
    slack.post("C1", "its reply", thread_ts=quiet, at=now - 2 * DAY + 10)
    edited = slack.post("C1", "typo here", at=now - DAY)
    _, first = run(slack)
    slack.clear_calls()
    new = slack.post("C1", "brand new")
    slack.edit("C1", edited, "typo fixed")
    reply = slack.post("C1", "a reply to a days-old thread", thread_ts=parent)
    old_reply = slack.post("C1", "still going", thread_ts=old_parent)
    events, last = run(slack, first.state)
    assert sorted(ids(events)) == sorted(f"C1_{t}" for t in (new, edited, reply, old_reply))
    by_id = {e.native_id: e for e in events if isinstance(e, SyncedObject)}
    assert by_id[f"C1_{edited}"].text == "typo fixed" and by_id[f"C1_{edited}"].updated_at
    history = slack.calls_of("conversations.history")
    assert history and all(float(c.params["oldest"]) >= now - THREAD_WINDOW_S - 5 for c in history), "not a rescan"
    replied = {c.params["ts"] for c in slack.calls_of("conversations.replies")}
    assert replied == {parent, old_parent}, "only threads that moved, plus the watched old one"
    assert all("oldest" in c.params for c in slack.calls_of("conversations.replies"))  # only the new replies
    # Nothing changed: nothing yielded (edits within EDIT_SKEW_S of a pass are read once more, for clock skew).
    monkeypatch.setattr(slack_module, "EDIT_SKEW_S", 0.0)
    events, _ = run(slack, last.state)
    assert ids(events) == []


def test_tombstone_and_reconcile_find_deletions_with_few_calls(slack: FakeSlack) -> None:
    now = time.time()
    keep = slack.post("C1", "keep", at=now - 2 * DAY)
    gone = slack.post("C1", "will be deleted", at=now - 2 * DAY + 1)
    parent = slack.post("C1", "parent", at=now - 2 * DAY + 2)
    r1 = slack.post("C1", "reply 1", thread_ts=parent, at=now - 2 * DAY + 3)
    r2 = slack.post("C1", "reply 2", thread_ts=parent, at=now - 2 * DAY + 4)
    other = slack.post("C1", "untouched thread", at=now - 2 * DAY + 5)
    r3 = slack.post("C1", "its reply", thread_ts=other, at=now - 2 * DAY + 6)
    _, cp = run(slack)
    slack.delete("C1", gone)
    slack.delete("C1", r2)
    slack.clear_calls()
    known = [KnownObject(f"C1_{t}", f"C1_{t}", float(t)) for t in (keep, gone, parent, other)]
    known += [KnownObject(f"C1_{t}", f"C1_{p}", float(t)) for t, p in ((r1, parent), (r2, parent), (r3, other))]
    present = set(P.reconcile(ctx(slack), request(cp.state), since=now - THREAD_WINDOW_S, known=known) or [])
    assert {k.native_id for k in known} - present == {f"C1_{gone}", f"C1_{r2}"}
    assert {c.params["ts"] for c in slack.calls_of("conversations.replies")} == {parent}, "the other thread vouched"
    slack.delete("C1", parent)  # the parent goes, its reply stays: a tombstone
    events, _ = run(slack, cp.state)
    assert [e.native_id for e in events if isinstance(e, DeletedObject)] == [f"C1_{parent}"]


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("revoked", CredentialsRejected),
        ("missing_scope", CredentialsRejected),
        ("account_inactive", CredentialsRejected),
        ("expired", TokenExpired),
        ("unknown", CredentialsRejected),
    ],
)
def test_credential_errors_are_typed(slack: FakeSlack, breakage: str, expected: type[Exception]) -> None:
    token = "xoxb-ok"
    if breakage == "revoked":
        slack.revoke(token)
    elif breakage == "expired":
        token = slack.add_token("xoxb-short", expires_in=-1)
    elif breakage == "unknown":
        token = "xoxb-never-issued"
    else:
        slack.break_token(token, breakage)
    with pytest.raises(expected):
        list(P.sync(ctx(slack, token), request()))


def test_resource_and_transient_errors(slack: FakeSlack) -> None:
    with pytest.raises(ResourceUnavailable):
        list(P.sync(ctx(slack), SyncRequest("C404", "channel", None, time.time() - DAY)))
    slack.add_channel("C9", "not-invited", is_member=False)
    with pytest.raises(ResourceUnavailable, match="not_in_channel"):
        P.probe(ctx(slack), SyncRequest("C9", "channel", None, time.time() - DAY))
    slack.fail("conversations.history", status=500, error="internal_error", retry_after=None)
    with pytest.raises(TransientProviderError):
        list(P.sync(ctx(slack), request()))
    dead = FakeSlack().start()
    url = dead.base_url
    dead.stop()  # nothing listens there any more
    c = ProviderContext(credentials={"access_token": "x"}, auth_type="api_token", base_url=url, http_timeout_s=2)
    with pytest.raises(TransientProviderError):
        P.account(c)


def test_429_within_the_bound_is_waited_out_through_ctx_sleep_and_beyond_it_is_rate_limited(slack: FakeSlack) -> None:
    slack.post("C1", "hello", at=time.time() - DAY)
    slack.fail("conversations.history", status=429, retry_after=2, times=2)
    waits: list[float] = []
    events = list(P.sync(ctx(slack, waits=waits), request()))
    assert waits == [2.0, 2.0] and len(ids(events)) == 1
    assert len(slack.calls_of("conversations.history")) == 3  # two refused, the third answered
    slack.fail("conversations.history", status=429, retry_after=120)
    with pytest.raises(RateLimited) as err:
        list(P.sync(ctx(slack, max_wait_s=60), request()))
    assert err.value.retry_after_s == 120


def test_oauth_rotation_single_use_refresh_token_and_rejections(slack: FakeSlack) -> None:
    slack.add_oauth_client("cid", "secret")
    rt = slack.issue_refresh_token("cid")
    creds = {"refresh_token": rt, "client_id": "cid", "client_secret": "secret", "expires_at": time.time() - 1}
    c = ctx(slack, "xoxe-expired", auth_type="oauth", creds=creds)
    rotated = P.refresh(c)
    assert rotated["access_token"].startswith("xoxe.xoxb-rotated") and rotated["refresh_token"] != rt
    assert rotated["expires_at"] > time.time() + 40000 and rotated["client_secret"] == "secret"
    call = slack.calls_of("oauth.v2.access")[-1]
    assert call.params["grant_type"] == "refresh_token" and call.params["refresh_token"] == rt
    with pytest.raises(RefreshRejected, match="invalid_refresh_token"):
        P.refresh(c)  # the old refresh token was single-use
    bad = ctx(
        slack, "x", auth_type="oauth", creds={**creds, "refresh_token": rotated["refresh_token"], "client_secret": "no"}
    )
    with pytest.raises(CredentialsRejected, match="bad_client_secret"):
        P.refresh(bad)


def test_credentials_are_validated_without_a_call() -> None:
    assert P.validate_credentials("api_token", {"api_token": "xoxb-1"}) == {"access_token": "xoxb-1"}
    with pytest.raises(ValueError, match="access_token"):
        P.validate_credentials("api_token", {"token": "x"})
    with pytest.raises(ValueError, match="refresh_token"):
        P.validate_credentials("oauth", {"access_token": "x", "client_id": "a", "client_secret": "b"})
