"""Incremental sync of one Notion resource: a page with its sub-pages, or a data source with its rows.

Page resource (`resource_type` `page`): the resource is the page and every page below it (child pages at
any depth, also inside toggles and columns). Objects: one per page, text = title + block tree as markdown,
`parent_id` = the page it sits in, `thread_id` = the resource's root page.
- First sync: a crawl from the root through `child_page` blocks, a checkpoint every PAGES_PER_CHECKPOINT
  pages (queue and membership in the checkpoint, so a kill resumes where it stopped). Pages last edited
  before `start` (lookback) are crawled for their children but not ingested.
- Later syncs: `POST /v1/search` cannot filter by time, so it is read sorted by `last_edited_time`
  descending and stopped at the cursor (`since`). A page found there belongs to the resource when its parent
  chain reaches the root through known members or other pages of the same pass (block parents resolved via
  `blocks.retrieve`). Changed members are re-fetched whole (an edit anywhere in a page bumps its
  `last_edited_time`); new members bring their sub-pages (crawled whatever their edit time); a member whose
  parent chain no longer reaches the root moved out: it and its descendants are reported deleted here.
Data source resource (`resource_type` `data_source`): the data source (title, description, schema) is an
object, and each row (a page) is one with `parent_id` and `thread_id` = the data source; rows come from
`data_sources.query` with the timestamp filter `last_edited_time on_or_after since`, ascending, a checkpoint
per result page (Notion's cursor kept; a cursor Notion refuses restarts the pass from `since`).

Cursor and overlap: `last_edited_time` is truncated to the minute and search is eventually consistent, so
the next pass starts OVERLAP_S before the previous pass began. The overlap costs calls, not re-ingestion: a
page is fetched again only when its `last_edited_time` differs from the one synced, or when it was fetched
within its own edit minute (a second edit in that minute would carry the same time).

Deletions: trashed pages and rows leave search and queries, and a page no longer shared answers 404:
`reconcile` lists what exists (search over pages; the query, bounded by `created_time`, for rows) and
confirms each known object missing from the listing with `pages.retrieve` (up to MAX_CONFIRM per cycle),
because search is known to miss pages. The resource's own page or data source answering 404 (no longer
shared) is `ResourceUnavailable`: a per-resource failure, nothing deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.notion.markdown import Rendered, epoch, nid, notion_url, render, render_properties, title_of
from ctxstore.ports.connector_provider import (
    Checkpoint,
    DeletedObject,
    ObjectFailure,
    ProviderError,
    ResourceUnavailable,
    SyncedObject,
    SyncEvent,
    SyncRequest,
)

if TYPE_CHECKING:
    from ctxstore.connectors.notion.session import NotionSession

OVERLAP_S = 180.0
MINUTE_S = 60.0
PAGES_PER_CHECKPOINT = 10
QUERY_PAGE = 50
LIST_PAGE = 100
MAX_BLOCKS = 5000  # per page; a longer page is cut (and says so)
MAX_DEPTH = 16
MAX_PARENT_HOPS = 10  # block parents walked up to find the page a nested page sits in


class Gone(ProviderError):
    """One object (not the resource) answered 404: deleted, or no longer shared."""


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _marker(edited: float, fetched_at: float) -> float:
    """What to remember of a fetched page: its edit time, or 0 (fetch again) when fetched within that minute."""
    return edited if edited + MINUTE_S <= fetched_at else 0.0


def is_trashed(obj: dict[str, Any]) -> bool:
    return bool(obj.get("in_trash") or obj.get("archived"))


# ---- objects ---------------------------------------------------------------------------------------------


def fetch_tree(session: NotionSession, block_id: str, *, missing: type[ProviderError] = Gone) -> list[dict[str, Any]]:
    """A page's (or block's) children, recursively, each with `_children`; sub-pages are not entered."""
    budget = [MAX_BLOCKS]

    def kids(parent: str, depth: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while budget[0] > 0:
            res = session.children(parent, cursor, missing=missing)
            for b in res.get("results") or []:
                if not isinstance(b, dict) or budget[0] <= 0:
                    continue
                budget[0] -= 1
                enter = b.get("has_children") and b.get("type") not in ("child_page", "child_database")
                if enter and depth < MAX_DEPTH:
                    b = dict(b, _children=kids(str(b["id"]), depth + 1))
                out.append(b)
            cursor = res.get("next_cursor") if res.get("has_more") else None
            if not cursor:
                break
        return out

    return kids(block_id, 0)


def page_object(
    page: dict[str, Any],
    tree: list[dict[str, Any]],
    *,
    parent: str | None,
    thread: str,
    data_source: str | None = None,
) -> tuple[SyncedObject, list[str]]:
    """A page (or data-source row) as an object, and the sub-pages its tree links to."""
    pid = nid(page["id"])
    out = Rendered()
    title = title_of(page) or "Untitled"
    out.lines += [f"# {title}", ""]
    if data_source:
        render_properties(page, out)
    render(tree, out)
    fields: dict[str, Any] = {"notion_page_id": pid, "notion_object": "page"}
    if parent:
        fields["notion_parent_id"] = parent
    if data_source:
        fields["notion_data_source_id"] = data_source
    edited = epoch(page.get("last_edited_time"))
    obj = SyncedObject(
        native_id=pid,
        kind="page",
        title=title,
        text=out.text,
        url=str(page.get("url") or notion_url(pid)),
        author=str((page.get("created_by") or {}).get("id") or "") or None,
        created_at=epoch(page.get("created_time")),
        updated_at=edited,
        thread_native_id=thread,
        parent_native_id=parent if parent and parent != pid else None,
        links=tuple(link for link in out.links if link.native_id != pid),
        native_fields=fields,
    )
    return obj, out.child_pages


def data_source_object(ds: dict[str, Any]) -> SyncedObject:
    dsid = nid(ds["id"])
    title = title_of(ds) or "Untitled data source"
    out = Rendered()
    out.lines += [f"# {title}", ""]
    description = "".join(str(r.get("plain_text") or "") for r in ds.get("description") or [] if isinstance(r, dict))
    if description.strip():
        out.lines += [description.strip(), ""]
    props = ds.get("properties") or {}
    if props:
        out.lines.append(
            "Properties: " + ", ".join(f"{n} ({(p or {}).get('type', '?')})" for n, p in sorted(props.items()))
        )
    db_parent = ds.get("database_parent") or {}
    parent = nid(db_parent.get("page_id")) if db_parent.get("type") == "page_id" else None
    fields: dict[str, Any] = {"notion_data_source_id": dsid, "notion_object": "data_source"}
    if (ds.get("parent") or {}).get("database_id"):
        fields["notion_database_id"] = nid(ds["parent"]["database_id"])
    return SyncedObject(
        native_id=dsid,
        kind="data_source",
        title=title,
        text=out.text,
        url=str(ds.get("url") or notion_url(dsid)),
        author=str((ds.get("created_by") or {}).get("id") or "") or None,
        created_at=epoch(ds.get("created_time")),
        updated_at=epoch(ds.get("last_edited_time")),
        thread_native_id=dsid,
        parent_native_id=parent,
        native_fields=fields,
    )


def parent_ref(obj: dict[str, Any]) -> tuple[str, str]:
    """(kind, id) of a page's parent: page_id, block_id, data_source_id, database_id or workspace."""
    parent = obj.get("parent") or {}
    kind = str(parent.get("type") or "workspace")
    return kind, nid(parent.get(kind)) if kind != "workspace" else ""


# ---- page trees ------------------------------------------------------------------------------------------


def sync_page_tree(session: NotionSession, request: SyncRequest, now: float, *, new_only: bool) -> Iterator[SyncEvent]:
    root = nid(request.resource_id)
    st = dict(request.checkpoint or {})
    if st.get("type") != "page" or st.get("root") != root:
        st = {
            "v": 1,
            "type": "page",
            "root": root,
            "phase": "crawl",
            "members": {},
            "queue": [[root, None]],
            "started": now,
        }
    if st["phase"] == "crawl":
        yield from _crawl(session, request, st, now)
    else:
        yield from _incremental(session, root, st, now, new_only=new_only)


def _fetch_page(session: NotionSession, pid: str, root: str, page: dict[str, Any] | None) -> dict[str, Any] | None:
    """The page object (None when a sub-page is gone or in the trash); the root's absence is the resource's."""
    if page is None:
        try:
            page = session.page(pid, missing=ResourceUnavailable if pid == root else Gone)
        except Gone:
            return None
    if is_trashed(page):
        if pid == root:
            raise ResourceUnavailable(f"notion page {root} is in the trash")
        return None
    return page


def _visit(
    session: NotionSession,
    root: str,
    pid: str,
    parent: str | None,
    page: dict[str, Any] | None,
    members: dict[str, list[Any]],
    queue: list[list[Any]],
    now: float,
) -> SyncedObject | ObjectFailure | None:
    """Fetch one page of the tree: its object (None when gone), remembered as a member; its sub-pages not
    yet known are queued (whatever their edit time: they are new to the resource)."""
    page = _fetch_page(session, pid, root, page)
    if page is None:
        return None
    try:
        tree = fetch_tree(session, pid)
    except Gone as exc:
        return ObjectFailure(pid, str(exc))
    obj, kids = page_object(page, tree, parent=parent, thread=root)
    members[pid] = [_marker(obj.updated_at or 0.0, now), parent]
    queued = {q[0] for q in queue}
    queue.extend([k, pid] for k in kids if k not in members and k not in queued)
    return obj


def _crawl(session: NotionSession, request: SyncRequest, st: dict[str, Any], now: float) -> Iterator[SyncEvent]:
    root = st["root"]
    members: dict[str, list[Any]] = st["members"]
    queue: list[list[Any]] = st["queue"]
    while queue:
        batch, st["queue"] = queue[:PAGES_PER_CHECKPOINT], queue[PAGES_PER_CHECKPOINT:]
        queue = st["queue"]
        for pid, parent in batch:
            got = _visit(session, root, pid, parent, None, members, queue, now)
            if isinstance(got, ObjectFailure) or (
                got is not None and ((got.updated_at or 0.0) >= request.start or pid == root)
            ):
                yield got
        if queue:
            yield Checkpoint(st, cursor=iso(st["started"]), has_more=True)
    done = {
        "v": 1,
        "type": "page",
        "root": root,
        "phase": "incremental",
        "members": members,
        "since": st["started"] - OVERLAP_S,
    }
    yield Checkpoint(done, cursor=iso(st["started"]), has_more=False)


def _containing_page(session: NotionSession, block_id: str, cache: dict[str, str]) -> str:
    """The page a block sits in (walking block parents up), "" when it cannot be told."""
    chain: list[str] = []
    current, result = block_id, ""
    for _ in range(MAX_PARENT_HOPS):
        if current in cache:
            result = cache[current]
            break
        chain.append(current)
        try:
            block = session.block(current, missing=Gone)
        except Gone:
            break
        kind, ref = parent_ref(block)
        if kind != "block_id":
            result = ref if kind == "page_id" else ""
            break
        current = ref
    for b in chain:
        cache[b] = result
    return result


def _incremental(
    session: NotionSession, root: str, st: dict[str, Any], now: float, *, new_only: bool
) -> Iterator[SyncEvent]:
    members: dict[str, list[Any]] = st["members"]
    p: dict[str, Any] = st.get("pass") or {}
    found: dict[str, dict[str, Any]] = {}  # page objects from this run's search (not kept in the checkpoint)
    _fetch_page(session, root, root, None)  # 404 (unshared) or trashed: the resource's failure
    if not p:
        p = {"started": now, "todo": []}
        parents = _changed_pages(session, float(st["since"]), found)
        yield from _plan_pass(root, members, parents, found, p["todo"], new_only=new_only)
    st["pass"] = p
    while p["todo"]:
        batch, p["todo"] = p["todo"][:PAGES_PER_CHECKPOINT], p["todo"][PAGES_PER_CHECKPOINT:]
        for pid, parent in batch:
            got = _visit(session, root, pid, parent, found.get(pid), members, p["todo"], now)
            if got is not None:
                yield got
        if p["todo"]:
            yield Checkpoint(st, cursor=iso(float(st["since"]) + OVERLAP_S), has_more=True)
    done = {
        "v": 1,
        "type": "page",
        "root": root,
        "phase": "incremental",
        "members": members,
        "since": float(p["started"]) - OVERLAP_S,
    }
    yield Checkpoint(done, cursor=iso(float(p["started"])), has_more=False)


def _with_descendants(pages: list[str], members: dict[str, list[Any]]) -> list[str]:
    out: list[str] = []
    todo = list(pages)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.append(pid)
        todo.extend(child for child, (_, parent) in members.items() if parent == pid)
    return out


# ---- data sources ----------------------------------------------------------------------------------------


def live_data_source(session: NotionSession, dsid: str) -> dict[str, Any]:
    ds = session.data_source(dsid)
    if is_trashed(ds):
        raise ResourceUnavailable(f"notion data source {dsid} is in the trash")
    return ds


def sync_data_source(
    session: NotionSession, request: SyncRequest, now: float, *, new_only: bool
) -> Iterator[SyncEvent]:
    from ctxstore.connectors.notion.session import RequestRefused

    dsid = nid(request.resource_id)
    st = dict(request.checkpoint or {})
    if st.get("type") != "data_source" or st.get("data_source") != dsid:
        st = {"v": 1, "type": "data_source", "data_source": dsid, "since": request.start, "recent": {}}
    ds = live_data_source(session, dsid)
    if not st.get("query_cursor"):
        st["started"] = now
        yield data_source_object(ds)
    since = float(st["since"])
    recent: dict[str, float] = st.setdefault("recent", {})
    while True:
        body: dict[str, Any] = {
            "filter": {"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": iso(since)}},
            "sorts": [{"timestamp": "last_edited_time", "direction": "ascending"}],
            "page_size": QUERY_PAGE,
        }
        if st.get("query_cursor"):
            body["start_cursor"] = st["query_cursor"]
        try:
            res = session.query(dsid, body)
        except RequestRefused as exc:
            if not st.get("query_cursor") or exc.code != "validation_error":
                raise
            st["query_cursor"] = None  # Notion no longer knows the stored cursor: this pass again from `since`
            continue
        for row in res.get("results") or []:
            if not isinstance(row, dict) or row.get("object") != "page" or is_trashed(row):
                continue
            rid = nid(row["id"])
            edited = epoch(row.get("last_edited_time")) or 0.0
            if recent.get(rid) and recent[rid] == edited:
                continue  # this version was synced in the overlap
            if new_only and (rid in recent or (epoch(row.get("created_time")) or 0.0) < since):
                continue  # new_only: rows created before this pass are not re-read for edits
            try:
                tree = fetch_tree(session, rid)
            except Gone as exc:
                yield ObjectFailure(rid, str(exc))
                continue
            obj, _ = page_object(row, tree, parent=dsid, thread=dsid, data_source=dsid)
            recent[rid] = _marker(edited, now)
            yield obj
        cursor = res.get("next_cursor") if res.get("has_more") else None
        if cursor:
            st["query_cursor"] = cursor
            yield Checkpoint(st, cursor=iso(since + OVERLAP_S), has_more=True)
            continue
        next_since = float(st.get("started") or now) - OVERLAP_S
        keep = {k: v for k, v in recent.items() if v == 0.0 or v >= next_since - MINUTE_S}
        done = {"v": 1, "type": "data_source", "data_source": dsid, "since": next_since, "recent": keep}
        yield Checkpoint(done, cursor=iso(next_since + OVERLAP_S), has_more=False)
        return


def _changed_pages(
    session: NotionSession, since: float, found: dict[str, dict[str, Any]]
) -> dict[str, tuple[str, str]]:
    """Pages edited since `since` (search runs newest first) and each one's parent, a block's resolved to
    the page that holds it; the page objects are kept in `found`."""
    parents: dict[str, tuple[str, str]] = {}
    cursor: str | None = None
    while True:
        res = session.search("page", cursor=cursor, page_size=LIST_PAGE)
        results = [r for r in res.get("results") or [] if isinstance(r, dict) and r.get("id")]
        stop = False
        for r in results:
            if (epoch(r.get("last_edited_time")) or 0.0) < since:
                stop = True
                break
            pid = nid(r["id"])
            found[pid] = r
            parents[pid] = parent_ref(r)
        cursor = res.get("next_cursor") if res.get("has_more") else None
        if stop or not cursor:
            break
    blocks: dict[str, str] = {}
    for pid, (kind, ref) in list(parents.items()):
        if kind == "block_id":
            parents[pid] = ("page_id", _containing_page(session, ref, blocks))
    return parents


class _Membership:
    """Whether a page's parent chain reaches the root (through this pass's pages or known members)."""

    def __init__(self, root: str, parents: dict[str, tuple[str, str]], members: dict[str, list[Any]]) -> None:
        self.root, self.parents, self.members = root, parents, members
        self.memo: dict[str, bool] = {}

    def __call__(self, pid: str) -> bool:
        if pid == self.root:
            return True
        if pid in self.memo:
            return self.memo[pid]
        if pid in self.parents:
            kind, ref = self.parents[pid]
        elif pid in self.members:
            kind, ref = "page_id", str(self.members[pid][1] or "")
        else:
            return False
        self.memo[pid] = False  # a cycle (a move seen half-way) does not reach the root
        self.memo[pid] = kind == "page_id" and bool(ref) and self(ref)
        return self.memo[pid]


def _plan_pass(
    root: str,
    members: dict[str, list[Any]],
    parents: dict[str, tuple[str, str]],
    found: dict[str, dict[str, Any]],
    todo: list[list[Any]],
    *,
    new_only: bool,
) -> Iterator[SyncEvent]:
    """Pages moved out of the tree are deleted (with their descendants); changed pages inside it go on `todo`."""
    member = _Membership(root, parents, members)
    moved_out = [pid for pid in parents if pid in members and pid != root and not member(pid)]
    for pid in _with_descendants(moved_out, members):
        members.pop(pid, None)
        yield DeletedObject(pid)
    for pid in parents:
        if pid != root and not member(pid):
            continue
        edited = epoch(found[pid].get("last_edited_time")) or 0.0
        known = members.get(pid)
        if known is not None and (new_only or (known[0] and float(known[0]) == edited)):
            if known[1] != parents[pid][1] and pid != root:
                known[1] = parents[pid][1]
            continue
        todo.append([pid, parents[pid][1] if pid != root else None])
