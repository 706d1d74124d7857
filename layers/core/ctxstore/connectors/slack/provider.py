"""Slack provider on the official `slack-sdk` WebClient (base URL from CTXSTORE_CONNECTOR_BASE_URL_SLACK).

Resources are channels (`conversations.list`; a bot token sees the channels its app was invited to).
Objects are messages: top-level ones from `conversations.history`, thread replies from
`conversations.replies`. Native id `<channel>_<ts>`; a reply's thread and parent are its root message
(`reply_to` link), a top-level message is its own thread.

Incremental sync and the trap every peer falls into: a reply to an old thread does not change anything
`conversations.history` returns after the cursor, so a pass bounded by `oldest=cursor` never sees it.
Each pass therefore re-reads a bounded window (THREAD_WINDOW_S, 7 days) of top-level messages and:
- yields messages newer than the cursor, and messages whose `edited.ts` is newer than the previous pass;
- for every parent whose `latest_reply`/`reply_count` moved since the checkpoint, calls
  `conversations.replies` (from the last known reply when replies were only added);
- polls threads whose parent is older than the window but which had replies within it (`latest_reply`
  in the window), one `conversations.replies` call each (at most MAX_WATCHED threads), so a thread that
  keeps going keeps being seen;
- a deleted parent that still has replies comes back as a `tombstone`: its DeletedObject is yielded.
Other deletions are found by `reconcile` over the same window: top-level ids from one history listing,
and replies vouched for without a call when a thread's reply count still matches what the service holds.
Known limits: an edit older than the window, an edit of a reply in a thread with no new reply, and a reply
to a thread silent for longer than the window are not seen.

Rate limits: a 429 is retried by the SDK's RateLimitErrorRetryHandler when its Retry-After is within
`ctx.max_wait_s` (the wait goes through `ctx.sleep`); a longer one raises RateLimited. `invalid_auth`,
`not_authed`, `token_revoked`, `account_inactive`, `missing_scope` and similar raise CredentialsRejected,
`token_expired` raises TokenExpired; `channel_not_found`/`not_in_channel` are per-resource failures.
OAuth: token rotation via `oauth.v2.access` (grant_type=refresh_token) at CTXSTORE_CONNECTOR_TOKEN_URL_SLACK;
`invalid_refresh_token` raises RefreshRejected.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from ctxstore.connectors.slack.client import REFRESH_REFUSED, RateLimitWithin, call, failure
from ctxstore.connectors.slack.info import INFO, THREAD_WINDOW_S
from ctxstore.ports.connector_provider import (
    AccountInfo,
    Checkpoint,
    DeletedObject,
    DiscoveredResource,
    DiscoverPage,
    KnownObject,
    ObjectLink,
    ProviderContext,
    RefreshRejected,
    SyncedObject,
    SyncEvent,
    SyncRequest,
    TransientProviderError,
)

# The SDK logs request bodies (tokens, client secrets) at DEBUG: never let that level through.
logging.getLogger("slack_sdk").setLevel(logging.WARNING)

EDIT_SKEW_S = 60.0  # an edit this close before the previous pass began is re-read (clocks differ)
PAGE = 200  # Slack's recommended page size for history and replies
MAX_WATCHED = 500  # threads polled beyond the window, most recently active first
OLD_THREADS_PER_CHECKPOINT = 25

SKIPPED_SUBTYPES = frozenset(
    {"channel_join", "channel_leave", "channel_topic", "channel_purpose", "channel_name", "channel_archive"}
)


def _ts(value: float) -> str:
    return f"{value:.6f}"


def _f(value: object) -> float:
    try:
        return float(str(value))
    except ValueError:
        return 0.0


class SlackProvider:
    info = INFO

    # ---- credentials and account ----------------------------------------------------------------
    def validate_credentials(self, auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
        token = credentials.get("access_token") or credentials.get("api_token") or credentials.get("bot_token")
        if not isinstance(token, str) or not token.strip() or len(token) > 1024 or any(c.isspace() for c in token):
            raise ValueError("'access_token' is required: a Slack token (xoxb-..., xoxp-...)")
        out: dict[str, Any] = {"access_token": token}
        if auth_type == "oauth":
            for key in ("refresh_token", "client_id", "client_secret"):
                value = credentials.get(key)
                if not isinstance(value, str) or not value.strip():
                    raise ValueError(f"'{key}' is required for auth_type oauth")
                out[key] = value
            expires_at = credentials.get("expires_at")
            if expires_at is not None:
                if not isinstance(expires_at, int | float) or isinstance(expires_at, bool):
                    raise ValueError("'expires_at' must be epoch seconds")
                out["expires_at"] = float(expires_at)
        return out

    def _client(self, ctx: ProviderContext, *, token: str | None = None, base_url: str | None = None) -> WebClient:
        return WebClient(
            token=token if token is not None else str(ctx.credentials.get("access_token", "")),
            base_url=base_url or ctx.base_url,
            timeout=max(1, int(ctx.http_timeout_s)),
            retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=1), RateLimitWithin(ctx)],
        )

    def account(self, ctx: ProviderContext) -> AccountInfo:
        data = call("auth.test", self._client(ctx).auth_test)
        team_id = str(data.get("team_id") or "")
        details = {"slack_team": str(data.get("team") or "")}
        if data.get("url"):
            details["slack_workspace_url"] = str(data["url"])
        return AccountInfo(account_scope=team_id, account_name=str(data.get("team") or team_id), details=details)

    def refresh(self, ctx: ProviderContext) -> dict[str, Any]:
        creds = ctx.credentials
        client = self._client(ctx, token="", base_url=ctx.token_url or ctx.base_url)
        try:
            data = client.oauth_v2_access(
                client_id=str(creds.get("client_id", "")),
                client_secret=str(creds.get("client_secret", "")),
                grant_type="refresh_token",
                refresh_token=str(creds.get("refresh_token", "")),
            ).data
        except SlackApiError as exc:
            error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
            if error in REFRESH_REFUSED:
                raise RefreshRejected(f"slack oauth.v2.access: {error}") from None
            raise failure("oauth.v2.access", exc) from None
        except (URLError, TimeoutError, OSError, SlackClientError, ValueError) as exc:
            raise TransientProviderError(f"slack oauth.v2.access: {type(exc).__name__}: {exc}") from None
        if not isinstance(data, dict):
            raise TransientProviderError("slack oauth.v2.access: unexpected answer")
        token = data.get("access_token")
        if not isinstance(token, str) or not token:
            raise TransientProviderError("slack oauth.v2.access: no access_token in the answer")
        rotated = dict(creds, access_token=token)
        if isinstance(data.get("refresh_token"), str) and data["refresh_token"]:
            rotated["refresh_token"] = data["refresh_token"]
        if isinstance(data.get("expires_in"), int | float):
            rotated["expires_at"] = ctx.now() + float(data["expires_in"])
        return rotated

    # ---- resources ---------------------------------------------------------------------------------
    def discover(self, ctx: ProviderContext, *, cursor: str | None = None, limit: int | None = None) -> DiscoverPage:
        client = self._client(ctx)
        found: list[DiscoveredResource] = []
        next_cursor = cursor
        while True:
            data = call(
                "conversations.list",
                client.conversations_list,
                types="public_channel,private_channel",
                exclude_archived=True,
                limit=limit or PAGE,
                cursor=next_cursor or None,
            )
            for ch in data.get("channels") or []:
                found.append(
                    DiscoveredResource(
                        resource_id=str(ch["id"]),
                        resource_type="channel",
                        name=str(ch.get("name") or ch["id"]),
                        metadata={
                            "name": ch.get("name"),
                            "is_private": bool(ch.get("is_private")),
                            "is_member": bool(ch.get("is_member", True)),
                            "num_members": ch.get("num_members"),
                            "created": ch.get("created"),
                        },
                    )
                )
            next_cursor = str((data.get("response_metadata") or {}).get("next_cursor") or "") or None
            if limit is not None or next_cursor is None:
                return DiscoverPage(found, next_cursor if limit is not None else None)

    def probe(self, ctx: ProviderContext, request: SyncRequest) -> bool:
        data = call(
            "conversations.history",
            self._client(ctx).conversations_history,
            channel=request.resource_id,
            oldest=_ts(request.start),
            limit=1,
        )
        return bool(data.get("messages"))

    # ---- mapping ---------------------------------------------------------------------------------------
    def _object(self, ctx: ProviderContext, channel: str, name: str, m: dict[str, Any]) -> SyncedObject | None:
        if m.get("subtype") in SKIPPED_SUBTYPES or m.get("subtype") == "tombstone" or not m.get("ts"):
            return None
        ts = str(m["ts"])
        thread_ts = str(m.get("thread_ts") or ts)
        reply = thread_ts != ts
        root = f"{channel}_{thread_ts}"
        text = str(m.get("text") or "")
        files = [str(f.get("name") or f.get("title") or "") for f in m.get("files") or [] if isinstance(f, dict)]
        if files:
            text = (text + "\n" if text else "") + "Files: " + ", ".join(x for x in files if x)
        first = next((line for line in text.splitlines() if line.strip()), "")
        workspace = (ctx.account.details.get("slack_workspace_url") if ctx.account else "") or ""
        url = None
        if workspace:
            url = f"{workspace.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"
            if reply:
                url += f"?thread_ts={thread_ts}&cid={channel}"
        edited = m.get("edited") if isinstance(m.get("edited"), dict) else None
        return SyncedObject(
            native_id=f"{channel}_{ts}",
            kind="message",
            title=f"#{name}: {first[:80]}" if first else f"#{name} message",
            text=text,
            url=url,
            author=str(m.get("user") or m.get("bot_id") or m.get("username") or "") or None,
            created_at=_f(ts),
            updated_at=_f(edited.get("ts")) if edited else None,
            thread_native_id=root,
            parent_native_id=root if reply else None,
            links=(ObjectLink(root, "reply_to"),) if reply else (),
            native_fields={
                "slack_channel": channel,
                "slack_channel_name": name,
                "slack_ts": ts,
                "slack_thread_ts": thread_ts,
            },
        )

    def _replies(
        self, client: WebClient, channel: str, thread_ts: str, *, oldest: str | None = None
    ) -> list[dict[str, Any]]:
        """Every reply of a thread (after `oldest` when given); [] when the thread is gone."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            try:
                data = call(
                    "conversations.replies",
                    client.conversations_replies,
                    channel=channel,
                    ts=thread_ts,
                    oldest=oldest,
                    inclusive=False if oldest else None,
                    limit=PAGE,
                    cursor=cursor,
                )
            except TransientProviderError as exc:
                if "thread_not_found" in str(exc):
                    return out
                raise
            out.extend(m for m in data.get("messages") or [] if str(m.get("ts")) != thread_ts)
            cursor = str((data.get("response_metadata") or {}).get("next_cursor") or "") or None
            if cursor is None:
                return out

    # ---- sync ----------------------------------------------------------------------------------------
    def sync(self, ctx: ProviderContext, request: SyncRequest) -> Iterator[SyncEvent]:
        state = dict(request.checkpoint or {})
        if state.get("phase") == "incremental":
            yield from self._incremental(ctx, request, state)
        else:
            yield from self._backfill(ctx, request, state)

    def _name(self, request: SyncRequest) -> str:
        return str(request.resource_metadata.get("name") or request.resource_id)

    def _backfill(self, ctx: ProviderContext, request: SyncRequest, state: dict[str, Any]) -> Iterator[SyncEvent]:
        """The first sync: newest to oldest down to request.start, a checkpoint per history page."""
        client = self._client(ctx)
        channel, name = request.resource_id, self._name(request)
        st: dict[str, Any] = {
            "v": 1,
            "phase": "backfill",
            "high_ts": state.get("high_ts"),
            "backfill_latest": state.get("backfill_latest"),
            "threads": dict(state.get("threads") or {}),
            "started_at": state.get("started_at") or ctx.now(),
        }
        while True:
            data = call(
                "conversations.history",
                client.conversations_history,
                channel=channel,
                oldest=_ts(request.start),
                latest=st["backfill_latest"],
                inclusive=False,
                limit=PAGE,
            )
            messages = [m for m in data.get("messages") or [] if m.get("ts")]
            for m in messages:
                obj = self._object(ctx, channel, name, m)
                if obj is not None:
                    yield obj
                if int(m.get("reply_count") or 0) > 0:
                    for r in self._replies(client, channel, str(m["ts"])):
                        reply = self._object(ctx, channel, name, r)
                        if reply is not None:
                            yield reply
                    st["threads"][str(m["ts"])] = [str(m.get("latest_reply") or m["ts"]), int(m["reply_count"])]
            if messages:
                stamps = [_f(m["ts"]) for m in messages]
                st["backfill_latest"] = _ts(min(stamps))
                st["high_ts"] = _ts(max([*stamps, _f(st["high_ts"] or 0)]))
            if not (data.get("has_more") and messages):
                done = {
                    "v": 1,
                    "phase": "incremental",
                    "high_ts": st["high_ts"],
                    "seen_at": st["started_at"],
                    "threads": self._pruned(st["threads"], ctx.now()),
                }
                yield Checkpoint(done, cursor=str(st["high_ts"] or _ts(st["started_at"])), has_more=False)
                return
            yield Checkpoint(dict(st), cursor=str(st["high_ts"] or ""), has_more=True)

    def _incremental(self, ctx: ProviderContext, request: SyncRequest, state: dict[str, Any]) -> Iterator[SyncEvent]:
        """A later sync: the window's top-level messages, changed threads, then threads watched beyond it."""
        client = self._client(ctx)
        channel, name = request.resource_id, self._name(request)
        now = ctx.now()
        threads: dict[str, list[Any]] = dict(state.get("threads") or {})
        high = _f(state.get("high_ts") or 0)
        seen_at = float(state.get("seen_at") or 0)
        p = dict(state.get("pass") or {})
        if not p:
            window_start = now - THREAD_WINDOW_S
            oldest = min(window_start, high) if high else min(window_start, seen_at or window_start)
            p = {"oldest": oldest, "latest": None, "started_at": now, "max_ts": high, "old": None}
        st = {"v": 1, "phase": "incremental", "high_ts": state.get("high_ts"), "seen_at": seen_at, "threads": threads}
        while p["old"] is None:
            data = call(
                "conversations.history",
                client.conversations_history,
                channel=channel,
                oldest=_ts(p["oldest"]),
                latest=p["latest"],
                inclusive=False,
                limit=PAGE,
            )
            messages = [m for m in data.get("messages") or [] if m.get("ts")]
            for m in messages:
                yield from self._changed(ctx, client, channel, name, m, high, seen_at, threads)
            if messages:
                stamps = [_f(m["ts"]) for m in messages]
                p["latest"] = _ts(min(stamps))
                p["max_ts"] = max([*stamps, float(p["max_ts"] or 0)])
            if data.get("has_more") and messages:
                yield Checkpoint({**st, "pass": dict(p)}, cursor=str(state.get("high_ts") or ""), has_more=True)
                continue
            window_start = p["started_at"] - THREAD_WINDOW_S
            # Threads whose parent is older than this pass's window but whose replies are recent.
            p["old"] = sorted(
                (t for t, (latest, _) in threads.items() if _f(t) <= p["oldest"] and _f(latest) >= window_start),
                key=lambda t: _f(threads[t][0]),
                reverse=True,
            )[:MAX_WATCHED]
        while p["old"]:
            batch, p["old"] = p["old"][:OLD_THREADS_PER_CHECKPOINT], p["old"][OLD_THREADS_PER_CHECKPOINT:]
            for thread_ts in batch:
                latest, count = threads.get(thread_ts, [thread_ts, 0])
                new = self._replies(client, channel, thread_ts, oldest=str(latest))
                for r in new:
                    reply = self._object(ctx, channel, name, r)
                    if reply is not None:
                        yield reply
                if new:
                    newest = max(_f(r["ts"]) for r in new)
                    threads[thread_ts] = [_ts(max(newest, _f(latest))), int(count) + len(new)]
            if p["old"]:
                yield Checkpoint({**st, "pass": dict(p)}, cursor=str(state.get("high_ts") or ""), has_more=True)
        high_ts = _ts(float(p["max_ts"])) if p["max_ts"] else state.get("high_ts")
        done = {
            "v": 1,
            "phase": "incremental",
            "high_ts": high_ts,
            "seen_at": p["started_at"],
            "threads": self._pruned(threads, p["started_at"]),
        }
        yield Checkpoint(done, cursor=str(high_ts or _ts(p["started_at"])), has_more=False)

    def _changed(
        self,
        ctx: ProviderContext,
        client: WebClient,
        channel: str,
        name: str,
        m: dict[str, Any],
        high: float,
        seen_at: float,
        threads: dict[str, list[Any]],
    ) -> Iterator[SyncEvent]:
        """What one top-level message of the window means since the last pass."""
        ts = str(m["ts"])
        if m.get("subtype") == "tombstone":
            yield DeletedObject(f"{channel}_{ts}")  # a deleted parent whose replies remain
        else:
            edited = m.get("edited")
            edited_ts = _f(edited.get("ts")) if isinstance(edited, dict) else 0.0
            if _f(ts) > high or edited_ts > seen_at - EDIT_SKEW_S:
                obj = self._object(ctx, channel, name, m)
                if obj is not None:
                    yield obj
        count = int(m.get("reply_count") or 0)
        if count <= 0:
            return
        latest = str(m.get("latest_reply") or ts)
        known = threads.get(ts)
        if known is not None and _f(known[0]) >= _f(latest) and int(known[1]) == count:
            return
        only_added = known is not None and count > int(known[1])
        for r in self._replies(client, channel, ts, oldest=str(known[0]) if only_added and known else None):
            reply = self._object(ctx, channel, name, r)
            if reply is not None:
                yield reply
        threads[ts] = [latest, count]

    @staticmethod
    def _pruned(threads: dict[str, list[Any]], now: float) -> dict[str, list[Any]]:
        """Threads still worth watching: parent or last reply within the window, newest activity first."""
        start = now - THREAD_WINDOW_S
        alive = [(t, v) for t, v in threads.items() if max(_f(t), _f(v[0])) >= start]
        alive.sort(key=lambda tv: _f(tv[1][0]), reverse=True)
        return dict(alive[: MAX_WATCHED * 4])

    # ---- deletions ---------------------------------------------------------------------------------------
    def reconcile(
        self, ctx: ProviderContext, request: SyncRequest, *, since: float | None, known: Sequence[KnownObject]
    ) -> Iterable[str] | None:
        client = self._client(ctx)
        channel = request.resource_id
        start = since if since is not None else request.start
        present: set[str] = set()
        counts: dict[str, int] = {}
        latest: str | None = None
        while True:
            data = call(
                "conversations.history",
                client.conversations_history,
                channel=channel,
                oldest=_ts(start),
                latest=latest,
                inclusive=False,
                limit=PAGE,
            )
            messages = [m for m in data.get("messages") or [] if m.get("ts")]
            for m in messages:
                if m.get("subtype") != "tombstone":
                    present.add(f"{channel}_{m['ts']}")
                counts[str(m["ts"])] = int(m.get("reply_count") or 0)
            if not (data.get("has_more") and messages):
                break
            latest = _ts(min(_f(m["ts"]) for m in messages))
        replies: dict[str, list[str]] = {}
        for k in known:
            root = k.thread_native_id
            if root and root != k.native_id and root.startswith(f"{channel}_"):
                replies.setdefault(root[len(channel) + 1 :], []).append(k.native_id)
        for thread_ts, ids in replies.items():
            if thread_ts in counts:
                if counts[thread_ts] == len(ids):
                    present.update(ids)  # the count still matches what we hold: nothing of it was deleted
                    continue
                found = self._replies(client, channel, thread_ts)
            else:  # parent older than the window (or gone): only replies within it are compared
                found = self._replies(client, channel, thread_ts, oldest=_ts(start))
            present.update(f"{channel}_{r['ts']}" for r in found)
        return present


def build_provider() -> SlackProvider:
    return SlackProvider()
