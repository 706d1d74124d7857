"""A loopback fake of the Slack Web API that the real `slack_sdk.WebClient(base_url=...)` talks to.

It answers the methods the Slack connector uses with Slack's own shapes and conventions: HTTP 200 with
`{"ok": false, "error": ...}` for API errors, 429 with `Retry-After` when told to, cursor pagination
(`response_metadata.next_cursor`), `has_more`, `oldest`/`latest`/`inclusive` bounds, threads (parents carry
`thread_ts`, `reply_count`, `latest_reply`; replies come from `conversations.replies` parent first), edits
(`edited.ts`), deletions (a deleted parent that still has replies is a `tombstone`), token revocation and
expiry, and token rotation through `oauth.v2.access` (grant_type=refresh_token, single-use refresh tokens).
Every call is recorded (method, params, token) so tests can assert what a sync asked for.

Usage: `with FakeSlack() as slack: slack.add_token("xoxb-1"); slack.add_channel("C1", "general"); ...`
and point the server at `slack.base_url` (CTXSTORE_CONNECTOR_BASE_URL_SLACK and _TOKEN_URL_SLACK).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.fakes.loopback import CallLog, LoopbackFake, OAuthClients, RestHandler


@dataclass
class Message:
    ts: str
    user: str
    text: str
    thread_ts: str | None = None  # set on replies (and on parents once they have replies, in answers)
    edited_ts: str | None = None
    deleted: bool = False
    subtype: str | None = None
    files: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Channel:
    id: str
    name: str
    is_private: bool = False
    is_member: bool = True
    archived: bool = False
    messages: dict[str, Message] = field(default_factory=dict)


@dataclass
class Token:
    value: str
    expires_at: float | None = None
    revoked: bool = False
    error: str | None = None  # forced answer for every call made with it (e.g. "missing_scope")


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, str]
    token: str | None
    at: float


@dataclass
class _Failure:
    status: int
    error: str
    retry_after: float | None
    times: int


VOCABULARY = [
    "deploy",
    "release",
    "incident",
    "customer",
    "billing",
    "invoice",
    "latency",
    "database",
    "index",
    "query",
    "cache",
    "migration",
    "roadmap",
    "design",
    "review",
    "meeting",
    "budget",
    "hiring",
    "onboarding",
    "security",
    "audit",
    "backup",
    "outage",
    "alert",
]


def _page_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"])
    except (ValueError, KeyError, TypeError):
        return -1


class FakeSlack(LoopbackFake, OAuthClients, CallLog[Call, _Failure]):
    refresh_token_format = "xoxe-1-refresh-{n}"
    thread_name = "fake-slack"

    def __init__(self, *, team_id: str = "T0FAKE", team: str = "Fake Team", domain: str = "fake") -> None:
        self.team_id, self.team, self.domain = team_id, team, domain
        self.channels: dict[str, Channel] = {}
        self.tokens: dict[str, Token] = {}
        self.access_token_lifetime_s = 43200
        self.page_limit_cap = 1000  # lower it to force small pages
        self.delay_s = 0.0  # added to every answer (a slow provider: kill -9 tests, chunk timing)
        self._lock = threading.RLock()
        self._last_ts = 0.0
        self._oauth_books()
        self._call_log()
        self._listen(self._handler())

    # ---- lifecycle -----------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # ---- seeding and changes ------------------------------------------------------------------------
    def add_token(self, value: str, *, expires_in: float | None = None) -> str:
        with self._lock:
            self.tokens[value] = Token(value, time.time() + expires_in if expires_in is not None else None)
        return value

    def revoke(self, token: str) -> None:
        with self._lock:
            self.tokens[token].revoked = True

    def break_token(self, token: str, error: str | None) -> None:
        with self._lock:
            self.tokens[token].error = error

    def add_channel(self, channel_id: str, name: str, *, is_private: bool = False, is_member: bool = True) -> Channel:
        with self._lock:
            ch = Channel(channel_id, name, is_private=is_private, is_member=is_member)
            self.channels[channel_id] = ch
            return ch

    def new_ts(self, at: float | None = None) -> str:
        """A fresh, strictly increasing ts (or one at a given time, made unique)."""
        with self._lock:
            value = at if at is not None else time.time()
            if at is None:
                value = max(value, self._last_ts + 0.000001)
                self._last_ts = value
            return f"{value:.6f}"

    def post(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U0ALICE",
        ts: str | None = None,
        thread_ts: str | None = None,
        at: float | None = None,
    ) -> str:
        with self._lock:
            ch = self.channels[channel]
            value = ts or self.new_ts(at)
            while value in ch.messages:
                value = f"{float(value) + 0.000001:.6f}"
            ch.messages[value] = Message(value, user, text, thread_ts=thread_ts)
            return value

    def edit(self, channel: str, ts: str, text: str) -> None:
        with self._lock:
            m = self.channels[channel].messages[ts]
            m.text = text
            m.edited_ts = self.new_ts()

    def delete(self, channel: str, ts: str) -> None:
        with self._lock:
            self.channels[channel].messages[ts].deleted = True

    def fail(
        self,
        method: str,
        *,
        status: int = 429,
        error: str = "ratelimited",
        retry_after: float | None = 1,
        times: int = 1,
    ) -> None:
        """The next `times` calls of `method` answer `status` (429 carries Retry-After)."""
        self._inject(method, _Failure(status, error, retry_after, times))

    # ---- the API ----------------------------------------------------------------------------------------
    def _replies_of(self, ch: Channel, parent_ts: str) -> list[Message]:
        return sorted(
            (m for m in ch.messages.values() if m.thread_ts == parent_ts and m.ts != parent_ts and not m.deleted),
            key=lambda m: float(m.ts),
        )

    def _render(self, ch: Channel, m: Message) -> dict[str, Any]:
        replies = self._replies_of(ch, m.ts) if m.thread_ts in (None, m.ts) else []
        out: dict[str, Any] = {"type": "message", "ts": m.ts, "user": m.user, "text": m.text, "team": self.team_id}
        if m.deleted:
            out = {"type": "message", "subtype": "tombstone", "ts": m.ts, "text": "This message was deleted.",
                   "hidden": True, "user": "USLACKBOT"}  # fmt: skip
        if m.subtype:
            out["subtype"] = m.subtype
        if m.edited_ts and not m.deleted:
            out["edited"] = {"user": m.user, "ts": m.edited_ts}
        if m.files:
            out["files"] = m.files
        if m.thread_ts and m.thread_ts != m.ts:
            out["thread_ts"] = m.thread_ts
            out["parent_user_id"] = ch.messages[m.thread_ts].user if m.thread_ts in ch.messages else None
        elif replies:
            out.update(
                thread_ts=m.ts,
                reply_count=len(replies),
                reply_users_count=len({r.user for r in replies}),
                latest_reply=replies[-1].ts,
                reply_users=sorted({r.user for r in replies}),
            )
        return out

    @staticmethod
    def _bounds(p: dict[str, str]) -> tuple[float, float, bool]:
        oldest = float(p.get("oldest") or 0)
        latest = float(p.get("latest") or 0) or float("inf")
        inclusive = p.get("inclusive") in ("1", "true", "True")
        return oldest, latest, inclusive

    @staticmethod
    def _within(ts: float, oldest: float, latest: float, inclusive: bool) -> bool:
        if inclusive:
            return oldest <= ts <= latest
        return oldest < ts < latest

    def _limit(self, p: dict[str, str], default: int = 100) -> int:
        try:
            return max(1, min(int(p.get("limit") or default), self.page_limit_cap))
        except ValueError:
            return default

    def _channel(self, p: dict[str, str], *, history: bool) -> Channel | dict[str, Any]:
        ch = self.channels.get(p.get("channel", ""))
        if ch is None:
            return {"ok": False, "error": "channel_not_found"}
        if history and not ch.is_member:
            return {"ok": False, "error": "not_in_channel"}
        return ch

    def _page(self, items: list[Any], p: dict[str, str], key: str, extra: dict[str, Any]) -> dict[str, Any]:
        start = _offset(p.get("cursor"))
        if start < 0:
            return {"ok": False, "error": "invalid_cursor"}
        limit = self._limit(p)
        chunk = items[start : start + limit]
        more = start + limit < len(items)
        return {
            "ok": True,
            key: chunk,
            "has_more": more,
            "response_metadata": {"next_cursor": _page_cursor(start + limit) if more else ""},
            **extra,
        }

    def api(self, method: str, p: dict[str, str], token: str | None, basic: tuple[str, str] | None) -> dict[str, Any]:
        if method == "oauth.v2.access":
            return self._oauth(p, basic)
        t = self.tokens.get(token or "")
        if not token:
            return {"ok": False, "error": "not_authed"}
        if t is None:
            return {"ok": False, "error": "invalid_auth"}
        if t.revoked:
            return {"ok": False, "error": "token_revoked"}
        if t.expires_at is not None and t.expires_at <= time.time():
            return {"ok": False, "error": "token_expired"}
        if t.error:
            return {"ok": False, "error": t.error}
        if method == "auth.test":
            return {"ok": True, "url": f"https://{self.domain}.slack.com/", "team": self.team, "user": "ctxbot",
                    "team_id": self.team_id, "user_id": "UBOT", "bot_id": "BBOT"}  # fmt: skip
        if method == "conversations.list":
            types = set((p.get("types") or "public_channel").split(","))
            exclude = p.get("exclude_archived") in ("1", "true")
            chans = [
                {
                    "id": c.id,
                    "name": c.name,
                    "is_channel": True,
                    "is_private": c.is_private,
                    "is_member": c.is_member,
                    "is_archived": c.archived,
                    "num_members": 3,
                    "created": 1600000000,
                }
                for c in sorted(self.channels.values(), key=lambda c: c.id)
                if ("private_channel" if c.is_private else "public_channel") in types and not (exclude and c.archived)
            ]
            return self._page(chans, p, "channels", {})
        if method == "conversations.info":
            found = self._channel(p, history=False)
            if isinstance(found, dict):
                return found
            return {"ok": True, "channel": {"id": found.id, "name": found.name, "is_private": found.is_private}}
        if method == "conversations.history":
            found = self._channel(p, history=True)
            if isinstance(found, dict):
                return found
            oldest, latest, inclusive = self._bounds(p)
            top = [
                m
                for m in found.messages.values()
                if (m.thread_ts in (None, m.ts))
                and self._within(float(m.ts), oldest, latest, inclusive)
                and (not m.deleted or self._replies_of(found, m.ts))
            ]
            top.sort(key=lambda m: float(m.ts), reverse=True)
            return self._page([self._render(found, m) for m in top], p, "messages", {"pin_count": 0})
        if method == "conversations.replies":
            found = self._channel(p, history=True)
            if isinstance(found, dict):
                return found
            parent = found.messages.get(p.get("ts", ""))
            replies = self._replies_of(found, parent.ts) if parent else []
            if parent is None or (parent.deleted and not replies):
                return {"ok": False, "error": "thread_not_found"}
            oldest, latest, inclusive = self._bounds(p)
            members = [parent] + [r for r in replies if self._within(float(r.ts), oldest, latest, inclusive)]
            return self._page([self._render(found, m) for m in members], p, "messages", {})
        return {"ok": False, "error": "unknown_method"}

    def _oauth(self, p: dict[str, str], basic: tuple[str, str] | None) -> dict[str, Any]:
        client_id, secret = basic or (p.get("client_id", ""), p.get("client_secret", ""))
        if client_id not in self.clients:
            return {"ok": False, "error": "invalid_client_id"}
        if self.clients[client_id] != secret:
            return {"ok": False, "error": "bad_client_secret"}
        if p.get("grant_type") != "refresh_token":
            return {"ok": False, "error": "invalid_grant_type"}
        rt = p.get("refresh_token", "")
        if self.refresh_tokens.pop(rt, None) != client_id:
            return {"ok": False, "error": "invalid_refresh_token"}
        self._issued += 1
        access = self.add_token(f"xoxe.xoxb-rotated-{self._issued}", expires_in=self.access_token_lifetime_s)
        return {
            "ok": True,
            "access_token": access,
            "token_type": "bot",
            "refresh_token": self.issue_refresh_token(client_id),
            "expires_in": self.access_token_lifetime_s,
            "team": {"id": self.team_id, "name": self.team},
        }

    # ---- HTTP ----------------------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(RestHandler):
            def _params(self) -> dict[str, str]:
                url = urlsplit(self.path)
                params = dict(parse_qsl(url.query, keep_blank_values=True))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                ctype = self.headers.get("Content-Type") or ""
                if ctype.startswith("multipart/form-data"):
                    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                        f"Content-Type: {ctype}\r\n\r\n".encode() + body
                    )
                    for part in msg.iter_parts():
                        name = part.get_param("name", header="content-disposition")
                        if name:
                            params[str(name)] = str(part.get_content()).strip()
                elif body:
                    params.update(parse_qsl(body.decode(), keep_blank_values=True))
                return params

            def _serve(self, verb: str) -> None:
                path = urlsplit(self.path).path
                method = path.rsplit("/", 1)[-1]
                params = self._params()
                auth = self.headers.get("Authorization") or ""
                token: str | None = None
                basic: tuple[str, str] | None = None
                if auth.startswith("Bearer "):
                    token = auth[7:].strip()
                elif auth.startswith("Basic "):
                    user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
                    basic = (user, pw)
                token = token or params.get("token")
                with fake._lock:
                    fake.calls.append(Call(method, dict(params), token, time.time()))
                    injected = fake._take_failure(method)
                    if injected is None:
                        answer = fake.api(method, params, token, basic)
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                if injected is not None:
                    headers = (
                        {"Retry-After": str(int(injected.retry_after))} if injected.retry_after is not None else {}
                    )
                    self._answer(injected.status, {"ok": False, "error": injected.error}, headers)
                    return
                self._answer(200, answer)

        return Handler

    # ---- bulk seeding (benchmarks) ---------------------------------------------------------------------------
    def seed_workspace(
        self,
        *,
        channels: int,
        messages: int,
        thread_every: int = 10,
        replies_per_thread: int = 3,
        start: float | None = None,
        span_s: float = 20 * 86400,
        words: list[str] | None = None,
    ) -> int:
        """About `messages` messages (top-level and replies) spread over `channels` channels and `span_s`
        seconds ending now; every `thread_every`-th top-level message gets `replies_per_thread` replies."""
        vocab = words or VOCABULARY
        end = time.time() - 60
        first = start if start is not None else end - span_s
        made = 0
        per_channel = max(1, messages // channels)
        with self._lock:
            for c in range(channels):
                ch = self.add_channel(f"C{c:07d}", f"channel-{c}")
                i = 0
                while i < per_channel:
                    at = first + (end - first) * (i / per_channel) + c * 0.000001
                    words_of = " ".join(vocab[(i * 7 + k * 3 + c) % len(vocab)] for k in range(12))
                    ts = f"{at:.6f}"
                    ch.messages[ts] = Message(ts, f"U{i % 17:05d}", f"Message {c}-{i}: {words_of}.")
                    made += 1
                    i += 1
                    if thread_every and i % thread_every == 0:
                        for r in range(min(replies_per_thread, per_channel - i)):
                            rts = f"{at + 1 + r:.6f}"
                            ch.messages[rts] = Message(
                                rts, "U00BOB", f"Reply {r} to {c}-{i}: {words_of}.", thread_ts=ts
                            )
                            made += 1
                            i += 1
        return made
