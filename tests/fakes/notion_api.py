"""A loopback fake of the Notion API (version 2025-09-03) that the real `notion_client.Client(base_url=...)` talks to.

It answers what the Notion connector uses, with Notion's shapes and conventions: `GET /v1/users/me`,
`POST /v1/search` (object filter, `last_edited_time` sort, `start_cursor`/`next_cursor`/`has_more`),
`GET /v1/pages/{id}`, `GET /v1/blocks/{id}`, `GET /v1/blocks/{id}/children` (paged), `GET /v1/data_sources/{id}`,
`POST /v1/data_sources/{id}/query` (timestamp filters, sorts, paging) and `POST /v1/oauth/token` (grant
`refresh_token` with HTTP basic auth of the client id and secret, returning a new access AND refresh token;
refresh tokens are single use). Errors are `{"object": "error", "status", "code", "message"}`: 401
`unauthorized`, 403 `restricted_resource`, 404 `object_not_found` (also for anything not shared with the
integration: sharing is inherited by sub-pages, rows and blocks), 429 `rate_limited` with `Retry-After`, and
the token endpoint's `invalid_grant` / `invalid_client`. Timestamps are answered truncated to the minute, as
Notion does. Trashed pages and rows leave search and queries but stay retrievable (`in_trash`).
Every call is recorded (route, method, path, query, body, token, Notion-Version) so tests can assert it.

Usage: `with FakeNotion() as notion: notion.add_token("ntn_1"); root = notion.add_page("Handbook", [para("hi")],
shared=True)`, then point the server at `notion.base_url` (CTXSTORE_CONNECTOR_BASE_URL_NOTION) and
`notion.token_url` (CTXSTORE_CONNECTOR_TOKEN_URL_NOTION). `notion_blocks` builds the block objects
(`para`, ...), `notion_seed.seed_wiki` the workspace the tests share.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.fakes.loopback import CallLog, LoopbackFake, OAuthClients, RestHandler
from tests.fakes.notion_blocks import rich, text

DAY = 86400.0
USER = "6f1c4f7e-1111-4c3e-9d0a-00000000a11c"


# ---- the workspace ------------------------------------------------------------------------------------------


@dataclass
class Block:
    id: str
    type: str
    payload: dict[str, Any]
    parent: tuple[str, str]  # ("page_id" | "block_id", id)
    created: float
    edited: float
    children: list[str] = field(default_factory=list)  # block ids, sub-page ids, database ids


@dataclass
class Page:
    id: str
    title: str
    parent: tuple[str, str]  # ("workspace", "") | ("page_id", id) | ("block_id", id) | ("data_source_id", id)
    created: float
    edited: float
    children: list[str] = field(default_factory=list)
    properties: dict[str, dict[str, Any]] = field(default_factory=dict)  # rows: Notion property values
    in_trash: bool = False
    author: str = USER


@dataclass
class DataSource:
    id: str
    database_id: str
    title: str
    parent_page: str
    created: float
    edited: float
    schema: dict[str, str] = field(default_factory=dict)  # property name -> type (the title property included)
    description: str = ""
    in_trash: bool = False


@dataclass
class Token:
    value: str
    expires_at: float | None = None
    revoked: bool = False
    restricted: bool = False  # every data call answers 403 restricted_resource
    calls_left: int | None = None  # expires after this many more calls (a token expiring mid-sync)


@dataclass(frozen=True)
class Call:
    route: str  # users.me, search, pages.retrieve, blocks.retrieve, blocks.children, data_sources.*, oauth.token
    method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any]
    token: str | None
    version: str | None
    at: float
    basic: tuple[str, str] | None = None  # HTTP basic auth (the token endpoint's client id and secret)


@dataclass
class _Failure:
    status: int
    code: str
    retry_after: float | None
    times: int


def _new_id() -> str:
    return str(uuid.uuid4())


def _norm(value: str) -> str:
    v = value.strip().lower()
    if re.fullmatch(r"[0-9a-f]{32}", v):
        return f"{v[:8]}-{v[8:12]}-{v[12:16]}-{v[16:20]}-{v[20:]}"
    return v


def _iso(ts: float) -> str:
    """Notion answers times truncated to the minute."""
    return datetime.fromtimestamp(ts - ts % 60, UTC).strftime("%Y-%m-%dT%H:%M:00.000Z")


def _epoch(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _minute(ts: float) -> float:
    return ts - ts % 60


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"])
    except (ValueError, KeyError, TypeError):
        return -1


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


class FakeNotion(LoopbackFake, OAuthClients, CallLog[Call, _Failure]):
    refresh_token_format = "nrt_refresh_{n}_{rand}"
    thread_name = "fake-notion"
    call_name_field = "route"

    def __init__(
        self, *, workspace: str = "Acme Wiki", workspace_id: str = "5a0c0de0-0000-4000-8000-00000000a0ce"
    ) -> None:
        self.workspace, self.workspace_id = workspace, workspace_id
        self.bot_id = "b0700000-0000-4000-8000-000000000b07"
        self.pages: dict[str, Page] = {}
        self.blocks: dict[str, Block] = {}
        self.data_sources: dict[str, DataSource] = {}
        self.databases: dict[str, str] = {}  # database id -> data source id
        self.shared: set[str] = set()
        self.tokens: dict[str, Token] = {}
        self.access_token_lifetime_s: float | None = 3600.0  # None: the token answer has no expires_in
        self.page_size_cap = 100  # lower it to force paging of search, queries and block children
        self.delay_s = 0.0
        self._lock = threading.RLock()
        self._oauth_books()  # refresh tokens are single use
        self._call_log()
        self._listen(self._handler())

    # ---- lifecycle ---------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/v1/oauth/token"

    def server_env(self, **extra: str) -> dict[str, str]:
        """`ctxstore serve` settings: the Notion SDK talks to this fake; the scheduler ticks fast."""
        from tests.support.connectors import fast_scheduler_env

        return fast_scheduler_env(
            CTXSTORE_CONNECTOR_BASE_URL_NOTION=self.base_url,
            CTXSTORE_CONNECTOR_TOKEN_URL_NOTION=self.token_url,
            **extra,
        )

    # ---- credentials -------------------------------------------------------------------------------------
    def add_token(self, value: str, *, expires_in: float | None = None) -> str:
        with self._lock:
            self.tokens[value] = Token(value, time.time() + expires_in if expires_in is not None else None)
        return value

    def revoke(self, token: str) -> None:
        with self._lock:
            self.tokens[token].revoked = True

    def expire(self, token: str) -> None:
        with self._lock:
            self.tokens[token].expires_at = time.time() - 1

    def expire_after(self, token: str, calls: int) -> None:
        """The token answers `calls` more calls, then 401 unauthorized (it expired mid-sync)."""
        with self._lock:
            self.tokens[token].calls_left = calls

    # ---- content -------------------------------------------------------------------------------------------
    def _add_blocks(self, specs: list[dict[str, Any]], parent: tuple[str, str], at: float) -> list[str]:
        ids: list[str] = []
        for spec in specs:
            bid = _new_id()
            b = Block(bid, spec["type"], dict(spec["payload"]), parent, at, at)
            self.blocks[bid] = b
            b.children = self._add_blocks(spec["children"], ("block_id", bid), at)
            ids.append(bid)
        return ids

    def _touch(self, kind: str, ref: str, at: float) -> None:
        """A change inside a page edits the page (and a nested page's new block edits its container)."""
        if kind == "page_id" and ref in self.pages:
            self.pages[ref].edited = at
        elif kind == "block_id" and ref in self.blocks:
            self.blocks[ref].edited = at
            self._touch(*self.blocks[ref].parent, at)

    def add_page(
        self,
        title: str,
        blocks: list[dict[str, Any]] | None = None,
        *,
        parent: str | None = None,
        in_block: str | None = None,
        data_source: str | None = None,
        properties: dict[str, dict[str, Any]] | None = None,
        at: float | None = None,
        edited: float | None = None,
        shared: bool = False,
    ) -> str:
        with self._lock:
            now = time.time()
            created = at if at is not None else now
            pid = _new_id()
            if data_source:
                where: tuple[str, str] = ("data_source_id", data_source)
            elif in_block:
                where = ("block_id", in_block)
            elif parent:
                where = ("page_id", parent)
            else:
                where = ("workspace", "")
            page = Page(
                pid, title, where, created, edited if edited is not None else created, properties=dict(properties or {})
            )
            self.pages[pid] = page
            page.children = self._add_blocks(blocks or [], ("page_id", pid), created)
            if where[0] == "page_id":
                self.pages[parent or ""].children.append(pid)
            elif where[0] == "block_id":
                self.blocks[in_block or ""].children.append(pid)
            if at is None and where[0] in ("page_id", "block_id"):
                self._touch(*where, now)
            if shared:
                self.shared.add(pid)
            return pid

    def add_data_source(
        self,
        title: str,
        parent_page: str,
        schema: dict[str, str],
        *,
        description: str = "",
        at: float | None = None,
        shared: bool = False,
    ) -> str:
        with self._lock:
            created = at if at is not None else time.time()
            dsid, dbid = _new_id(), _new_id()
            self.data_sources[dsid] = DataSource(
                dsid, dbid, title, parent_page, created, created, dict(schema), description
            )
            self.databases[dbid] = dsid
            self.pages[parent_page].children.append(dbid)
            if shared:
                self.shared.add(dsid)
            return dsid

    def add_row(
        self,
        data_source: str,
        title: str,
        properties: dict[str, dict[str, Any]] | None = None,
        blocks: list[dict[str, Any]] | None = None,
        *,
        at: float | None = None,
        edited: float | None = None,
    ) -> str:
        return self.add_page(title, blocks, data_source=data_source, properties=properties, at=at, edited=edited)

    def edit_page(
        self,
        page_id: str,
        *,
        title: str | None = None,
        append: list[dict[str, Any]] | None = None,
        properties: dict[str, dict[str, Any]] | None = None,
        at: float | None = None,
    ) -> None:
        with self._lock:
            page = self.pages[page_id]
            now = at if at is not None else time.time()
            if title is not None:
                page.title = title
            if append:
                page.children += self._add_blocks(append, ("page_id", page_id), now)
            if properties:
                page.properties.update(properties)
            page.edited = now

    def edit_block(self, block_id: str, *parts: Any) -> None:
        """New rich text for a block: the block and the page it sits in are edited now."""
        with self._lock:
            b = self.blocks[block_id]
            b.payload["rich_text"] = rich(parts)
            now = time.time()
            b.edited = now
            self._touch(*b.parent, now)

    def trash(self, page_id: str) -> None:
        with self._lock:
            self.pages[page_id].in_trash = True
            self.pages[page_id].edited = time.time()

    def unshare(self, object_id: str) -> None:
        with self._lock:
            self.shared.discard(object_id)

    def share(self, object_id: str) -> None:
        with self._lock:
            self.shared.add(object_id)

    def move(self, page_id: str, new_parent: str) -> None:
        with self._lock:
            page, now = self.pages[page_id], time.time()
            kind, ref = page.parent
            holder = (
                self.pages[ref].children
                if kind == "page_id"
                else self.blocks[ref].children
                if kind == "block_id"
                else []
            )
            if page_id in holder:
                holder.remove(page_id)
            if kind in ("page_id", "block_id"):
                self._touch(kind, ref, now)
            page.parent = ("page_id", new_parent)
            self.pages[new_parent].children.append(page_id)
            self.pages[new_parent].edited = now
            page.edited = now

    def block_ids(self, page_id: str, kind: str | None = None) -> list[str]:
        """Ids of a page's top-level blocks (of one type)."""
        return [
            b
            for b in self.pages[page_id].children
            if b in self.blocks and (kind is None or self.blocks[b].type == kind)
        ]

    # ---- failures and the call log -----------------------------------------------------------------------
    def fail(
        self,
        route: str,
        *,
        status: int = 429,
        code: str = "rate_limited",
        retry_after: float | None = 1,
        times: int = 1,
    ) -> None:
        self._inject(route, _Failure(status, code, retry_after, times))

    # ---- access ------------------------------------------------------------------------------------------
    def _page_of_block(self, block_id: str) -> str | None:
        current = block_id
        for _ in range(64):
            b = self.blocks.get(current)
            if b is None:
                return None
            kind, ref = b.parent
            if kind == "page_id":
                return ref
            current = ref
        return None

    def _accessible(self, object_id: str) -> bool:
        current: str | None = object_id
        for _ in range(128):
            if current is None or current == "":
                return False
            if current in self.shared:
                return True
            if current in self.pages:
                kind, ref = self.pages[current].parent
                current = self._page_of_block(ref) if kind == "block_id" else ref if kind != "workspace" else None
            elif current in self.data_sources:
                current = self.data_sources[current].parent_page
            elif current in self.databases:
                current = self.databases[current]
            elif current in self.blocks:
                current = self._page_of_block(current)
            else:
                return False
        return False

    def _not_found(self, object_id: str) -> ApiError:
        return ApiError(
            404,
            "object_not_found",
            f"Could not find object with ID: {object_id}. Make sure the relevant"
            " pages and databases are shared with your integration.",
        )

    # ---- rendering ------------------------------------------------------------------------------------------
    def _user(self, uid: str = USER) -> dict[str, Any]:
        return {"object": "user", "id": uid}

    def _parent(self, where: tuple[str, str]) -> dict[str, Any]:
        kind, ref = where
        if kind == "workspace":
            return {"type": "workspace", "workspace": True}
        if kind == "data_source_id":
            return {"type": "data_source_id", "data_source_id": ref, "database_id": self.data_sources[ref].database_id}
        return {"type": kind, kind: ref}

    def _url(self, title: str, oid: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-")
        return f"https://www.notion.so/{slug + '-' if slug else ''}{oid.replace('-', '')}"

    def render_page(self, page: Page) -> dict[str, Any]:
        if page.parent[0] == "data_source_id":
            ds = self.data_sources[page.parent[1]]
            title_name = next((n for n, t in ds.schema.items() if t == "title"), "Name")
        else:
            title_name = "title"
        props: dict[str, Any] = {title_name: {"id": "title", "type": "title", "title": [text(page.title)]}}
        for name, value in page.properties.items():
            props[name] = {"id": re.sub(r"\W", "", name)[:4] or "p", **value}
        return {
            "object": "page",
            "id": page.id,
            "created_time": _iso(page.created),
            "last_edited_time": _iso(page.edited),
            "created_by": self._user(page.author),
            "last_edited_by": self._user(page.author),
            "cover": None,
            "icon": None,
            "parent": self._parent(page.parent),
            "archived": page.in_trash,
            "in_trash": page.in_trash,
            "is_locked": False,
            "properties": props,
            "url": self._url(page.title, page.id),
            "public_url": None,
        }

    def render_data_source(self, ds: DataSource) -> dict[str, Any]:
        props = {n: {"id": re.sub(r"\W", "", n)[:4] or "p", "name": n, "type": t, t: {}} for n, t in ds.schema.items()}
        return {
            "object": "data_source",
            "id": ds.id,
            "created_time": _iso(ds.created),
            "last_edited_time": _iso(ds.edited),
            "created_by": self._user(),
            "last_edited_by": self._user(),
            "title": [text(ds.title)],
            "description": [text(ds.description)] if ds.description else [],
            "properties": props,
            "parent": {"type": "database_id", "database_id": ds.database_id},
            "database_parent": {"type": "page_id", "page_id": ds.parent_page},
            "url": self._url(ds.title, ds.id),
            "archived": ds.in_trash,
            "in_trash": ds.in_trash,
            "is_inline": True,
            "icon": None,
            "cover": None,
        }

    def _render_child(self, child_id: str, parent: tuple[str, str]) -> dict[str, Any] | None:
        base = {
            "object": "block",
            "id": child_id,
            "parent": {"type": parent[0], parent[0]: parent[1]},
            "created_by": self._user(),
            "last_edited_by": self._user(),
            "archived": False,
            "in_trash": False,
        }
        if child_id in self.blocks:
            b = self.blocks[child_id]
            return {
                **base,
                "created_time": _iso(b.created),
                "last_edited_time": _iso(b.edited),
                "has_children": bool(b.children),
                "type": b.type,
                b.type: b.payload,
            }
        if child_id in self.pages:
            p = self.pages[child_id]
            if p.in_trash:
                return None
            return {
                **base,
                "created_time": _iso(p.created),
                "last_edited_time": _iso(p.edited),
                "has_children": bool(p.children),
                "type": "child_page",
                "child_page": {"title": p.title},
            }
        if child_id in self.databases:
            ds = self.data_sources[self.databases[child_id]]
            return {
                **base,
                "created_time": _iso(ds.created),
                "last_edited_time": _iso(ds.edited),
                "has_children": False,
                "type": "child_database",
                "child_database": {"title": ds.title},
            }
        return None

    # ---- the API ----------------------------------------------------------------------------------------------
    def _limit(self, value: object) -> int:
        try:
            n = int(str(value)) if value is not None else 100
        except ValueError:
            raise ApiError(400, "validation_error", "page_size should be a number") from None
        return max(1, min(n, 100, self.page_size_cap))

    def _page_of(self, items: list[Any], cursor: object, size: object) -> dict[str, Any]:
        start = _offset(str(cursor) if cursor else None)
        if start < 0:
            raise ApiError(400, "validation_error", "start_cursor should be a valid cursor")
        n = self._limit(size)
        chunk = items[start : start + n]
        more = start + n < len(items)
        return {
            "object": "list",
            "results": chunk,
            "next_cursor": _cursor(start + n) if more else None,
            "has_more": more,
        }

    def _check_token(self, token: str | None) -> Token:
        t = self.tokens.get(token or "")
        if t is not None and t.calls_left is not None:
            if t.calls_left <= 0:
                t.expires_at = min(t.expires_at or time.time(), time.time() - 1)
            t.calls_left -= 1
        if t is None or t.revoked or (t.expires_at is not None and t.expires_at <= time.time()):
            raise ApiError(401, "unauthorized", "API token is invalid.")
        return t

    def api(
        self, route: str, method: str, ref: str, query: dict[str, str], body: dict[str, Any], token: str | None
    ) -> Any:
        t = self._check_token(token)
        if t.restricted:
            raise ApiError(403, "restricted_resource", "Insufficient permissions for this endpoint.")
        if route == "users.me":
            return {
                "object": "user",
                "id": self.bot_id,
                "name": "ctxstore",
                "avatar_url": None,
                "type": "bot",
                "bot": {
                    "owner": {"type": "workspace", "workspace": True},
                    "workspace_name": self.workspace,
                    "workspace_id": self.workspace_id,
                },
            }
        if route == "search":
            return self._search(body)
        if route == "pages.retrieve":
            page = self.pages.get(ref)
            if page is None or not self._accessible(ref):
                raise self._not_found(ref)
            return self.render_page(page)
        if route == "blocks.retrieve":
            if ref in self.pages and self._accessible(ref):
                p = self.pages[ref]
                return self._render_child(ref, p.parent if p.parent[0] != "workspace" else ("page_id", ""))
            b = self.blocks.get(ref)
            if b is None or not self._accessible(ref):
                raise self._not_found(ref)
            return self._render_child(ref, b.parent)
        if route == "blocks.children":
            holder = self.pages.get(ref) or self.blocks.get(ref)
            if holder is None or not self._accessible(ref) or (isinstance(holder, Page) and holder.in_trash):
                raise self._not_found(ref)
            where = ("page_id", ref) if isinstance(holder, Page) else ("block_id", ref)
            children = [c for c in (self._render_child(x, where) for x in holder.children) if c is not None]
            return self._page_of(children, query.get("start_cursor"), query.get("page_size"))
        if route == "data_sources.retrieve":
            ds = self.data_sources.get(ref)
            if ds is None or not self._accessible(ref):
                raise self._not_found(ref)
            return self.render_data_source(ds)
        if route == "data_sources.query":
            return self._query(ref, body)
        raise ApiError(400, "invalid_request_url", "Invalid request URL.")

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        kind = (body.get("filter") or {}).get("value")
        words = str(body.get("query") or "").lower()
        found: list[tuple[float, str, dict[str, Any]]] = []
        if kind in (None, "page"):
            for p in self.pages.values():
                if not p.in_trash and self._accessible(p.id) and words in p.title.lower():
                    found.append((p.edited, p.id, self.render_page(p)))
        if kind in (None, "data_source"):
            for ds in self.data_sources.values():
                if not ds.in_trash and self._accessible(ds.id) and words in ds.title.lower():
                    found.append((ds.edited, ds.id, self.render_data_source(ds)))
        sort = body.get("sort") or {}
        found.sort(key=lambda x: (x[0], x[1]), reverse=sort.get("direction") != "ascending")
        return self._page_of([x[2] for x in found], body.get("start_cursor"), body.get("page_size"))

    @staticmethod
    def _matches(page: Page, f: dict[str, Any]) -> bool:
        if "and" in f:
            return all(FakeNotion._matches(page, x) for x in f["and"])
        if "or" in f:
            return any(FakeNotion._matches(page, x) for x in f["or"])
        stamp = f.get("timestamp")
        if stamp not in ("last_edited_time", "created_time"):
            raise ApiError(400, "validation_error", "this fake filters by timestamp only")
        value = _minute(page.edited if stamp == "last_edited_time" else page.created)
        cond = f.get(stamp) or {}
        for op, bound in cond.items():
            b = _epoch(str(bound))
            ok = {
                "on_or_after": value >= b,
                "after": value > b,
                "on_or_before": value <= b,
                "before": value < b,
                "equals": value == b,
            }.get(op)
            if ok is None:
                raise ApiError(400, "validation_error", f"unknown timestamp condition {op}")
            if not ok:
                return False
        return True

    def _query(self, dsid: str, body: dict[str, Any]) -> dict[str, Any]:
        ds = self.data_sources.get(dsid)
        if ds is None or not self._accessible(dsid):
            raise self._not_found(dsid)
        rows = [p for p in self.pages.values() if p.parent == ("data_source_id", dsid) and not p.in_trash]
        if body.get("filter"):
            rows = [p for p in rows if self._matches(p, body["filter"])]
        sorts = body.get("sorts") or [{"timestamp": "created_time", "direction": "descending"}]
        first = sorts[0]
        stamp = first.get("timestamp", "created_time")
        rows.sort(
            key=lambda p: ((p.edited if stamp == "last_edited_time" else p.created), p.id),
            reverse=first.get("direction") == "descending",
        )
        return self._page_of([self.render_page(p) for p in rows], body.get("start_cursor"), body.get("page_size"))

    def oauth_token(self, body: dict[str, Any], basic: tuple[str, str] | None) -> dict[str, Any]:
        client_id, secret = basic or ("", "")
        if self.clients.get(client_id) != secret or not client_id:
            raise ApiError(401, "invalid_client", "Client authentication failed.")
        if body.get("grant_type") != "refresh_token":
            raise ApiError(400, "unsupported_grant_type", "grant_type must be refresh_token here")
        if self.refresh_tokens.pop(str(body.get("refresh_token") or ""), None) != client_id:
            raise ApiError(400, "invalid_grant", "Invalid refresh token.")
        self._issued += 1
        lifetime = self.access_token_lifetime_s
        access = self.add_token(f"ntn_oauth_rotated_{self._issued}_{uuid.uuid4().hex[:8]}", expires_in=lifetime)
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "bearer",
            "refresh_token": self.issue_refresh_token(client_id),
            "bot_id": self.bot_id,
            "workspace_id": self.workspace_id,
            "workspace_name": self.workspace,
            "workspace_icon": None,
            "owner": {"type": "workspace", "workspace": True},
            "duplicated_template_id": None,
            "request_id": _new_id(),
        }
        if lifetime is not None:
            answer["expires_in"] = int(lifetime)
        return answer

    # ---- HTTP ------------------------------------------------------------------------------------------------------
    @staticmethod
    def route_of(method: str, path: str) -> tuple[str, str]:
        parts = [p for p in path.split("/") if p][1:]  # drop "v1"
        if parts == ["users", "me"]:
            return "users.me", ""
        if parts == ["search"]:
            return "search", ""
        if parts == ["oauth", "token"]:
            return "oauth.token", ""
        if len(parts) == 2 and parts[0] == "pages":
            return "pages.retrieve", _norm(parts[1])
        if len(parts) == 2 and parts[0] == "blocks":
            return "blocks.retrieve", _norm(parts[1])
        if len(parts) == 3 and parts[0] == "blocks" and parts[2] == "children":
            return "blocks.children", _norm(parts[1])
        if len(parts) == 2 and parts[0] == "data_sources":
            return "data_sources.retrieve", _norm(parts[1])
        if len(parts) == 3 and parts[0] == "data_sources" and parts[2] == "query":
            return "data_sources.query", _norm(parts[1])
        return "unknown", ""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(RestHandler):
            # Headers and body go out in two writes; on a kept-alive connection (httpx) Nagle's algorithm
            # and the client's delayed ACK would add ~40 ms to every answer.
            disable_nagle_algorithm = True

            def _serve(self, method: str) -> None:
                url = urlsplit(self.path)
                query = dict(parse_qsl(url.query, keep_blank_values=True))
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    self._answer(400, {"object": "error", "status": 400, "code": "invalid_json", "message": "bad JSON"})
                    return
                auth = self.headers.get("Authorization") or ""
                token = auth[7:].strip() if auth.startswith("Bearer ") else None
                basic = None
                if auth.startswith("Basic "):
                    user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
                    basic = (user, pw)
                route, ref = fake.route_of(method, url.path)
                with fake._lock:
                    fake.calls.append(
                        Call(
                            route,
                            method,
                            url.path,
                            query,
                            body if isinstance(body, dict) else {},
                            token,
                            self.headers.get("Notion-Version"),
                            time.time(),
                            basic,
                        )
                    )
                    injected = fake._take_failure(route)
                    status, answer, headers = 200, None, {}
                    if injected is None:
                        try:
                            if route == "oauth.token":
                                answer = fake.oauth_token(body, basic)
                            else:
                                answer = fake.api(route, method, ref, query, body, token)
                        except ApiError as exc:
                            status, headers = exc.status, exc.headers
                            if route == "oauth.token":
                                answer = {"error": exc.code, "error_description": exc.message}
                            else:
                                answer = {
                                    "object": "error",
                                    "status": exc.status,
                                    "code": exc.code,
                                    "message": exc.message,
                                    "request_id": _new_id(),
                                }
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                if injected is not None:
                    headers = (
                        {"Retry-After": str(int(injected.retry_after))} if injected.retry_after is not None else {}
                    )
                    self._answer(
                        injected.status,
                        {
                            "object": "error",
                            "status": injected.status,
                            "code": injected.code,
                            "message": "injected failure",
                        },
                        headers,
                    )
                    return
                self._answer(status, answer, headers)

        return Handler
