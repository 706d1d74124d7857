"""Incremental sync of one repository: three streams read by ``updated_at`` with a keyset, an overlap window,
per-stream ETags, and a checkpoint after every page.

Streams, in order: ``/issues?state=all`` (issues and pull requests), ``/issues/comments`` (issue and PR
conversation comments, repo-wide: no call per issue) and ``/pulls/comments`` (PR review comments), each with
``since=<ts>&sort=updated&direction=asc&per_page=100``.

Keyset, not page numbers: after a page the next request asks ``since=<largest updated_at on the page>`` at
page 1. Offset paging over a list sorted by ``updated_at`` skips an item whenever an earlier one is edited
mid-sync (it moves to the end and everything shifts left by one); the keyset cannot skip. Items at exactly
the ``since`` second are read again and dropped by the dedupe below. Only when a whole page shares one
second (a bulk edit) does it step ``page`` within that second.

Cursor and overlap: a stream's cursor is the largest ``updated_at`` it has seen. The next cycle starts at
``cursor - OVERLAP_S`` (never before the first sync's ``start``). GitHub documents no bound on how late a
write becomes visible in list results; Onyx moved its start back 3 h after issues and PRs went missing
("delayed processing on GitHub side"), so the window is 3 h. Its cost is requests, not re-ingestion: the
checkpoint keeps ``seen`` = {id: updated_at} for objects inside the window, and an object is yielded again
only when its ``updated_at`` changed. A repository with fewer than 100 changes per stream in the last 3 h
re-reads one page per stream per cycle.

Conditional requests: when a cycle's first request of a stream returned the whole result (under 100
items), its ETag is kept in the checkpoint with the ``since`` it answered. The next cycle asks the same
URL (the cursor did not move) with ``If-None-Match``; GitHub's 304 costs no rate limit and means nothing
changed, so an idle repository costs three free requests per cycle, from its second idle cycle on (the
first idle cycle asks a new ``since``). A full first page is not cached: its ETag would not change when
something after it changed.

``new_only`` (sync_mode): objects already synced (in ``seen``) or created before the cycle's ``since`` are
skipped, so edits of old objects are ignored and new issues, PRs and comments still arrive.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.github.mapping import (
    epoch,
    issue_comment_native_id,
    issue_native_id,
    map_issue,
    map_issue_comment,
    map_review_comment,
    review_comment_native_id,
)
from ctxstore.ports.connector_provider import (
    Checkpoint,
    ObjectFailure,
    ProviderError,
    SyncedObject,
    SyncEvent,
)

if TYPE_CHECKING:
    from ctxstore.connectors.github.client import GitHubSession

OVERLAP_S = 3 * 3600
PER_PAGE = 100
VERIFY_MISSING_MAX = 20  # known objects missing from a reconcile listing confirmed one by one, per stream
STATE_VERSION = 1


@dataclass(frozen=True)
class Stream:
    name: str
    path: str  # under /repos/{owner}/{repo}
    params: dict[str, str]
    mapper: Callable[[str, dict[str, Any]], SyncedObject | ObjectFailure]
    native_id: Callable[[str, dict[str, Any]], str]


STREAMS = (
    Stream("issues", "/issues", {"state": "all"}, map_issue, lambda repo, i: issue_native_id(repo, int(i["number"]))),
    Stream(
        "issue_comments",
        "/issues/comments",
        {},
        map_issue_comment,
        lambda repo, c: issue_comment_native_id(repo, int(c["id"])),
    ),
    Stream(
        "review_comments",
        "/pulls/comments",
        {},
        map_review_comment,
        lambda repo, c: review_comment_native_id(repo, int(c["id"])),
    ),
)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- checkpoint state ----------------------------------------------------------------------------


def begin_cycle(checkpoint: dict[str, Any] | None, start: float, *, overlap_s: int = OVERLAP_S) -> dict[str, Any]:
    """The state to sync from: resume an unfinished cycle as is, or open the next one from the cursors."""
    if not _valid(checkpoint):
        floor = int(start)
        return {
            "v": STATE_VERSION,
            "start": floor,
            "cycle_done": False,
            "streams": {s.name: _fresh_stream(floor, None) for s in STREAMS},
        }
    assert checkpoint is not None
    state = copy.deepcopy(checkpoint)
    if state["cycle_done"]:
        state["cycle_done"] = False
        for name, st in state["streams"].items():
            since = st["since"] if st["cursor"] is None else max(state["start"], st["cursor"] - overlap_s)
            state["streams"][name] = {**st, "since": since, "page": 1, "done": False, "floor": since}
    return state


def _fresh_stream(since: int, cursor: int | None) -> dict[str, Any]:
    return {"since": since, "page": 1, "cursor": cursor, "done": False, "seen": {}, "etag": None, "floor": since}


def _valid(checkpoint: dict[str, Any] | None) -> bool:
    """A checkpoint this code wrote (an unknown one restarts from `start`: a resync upserts, it loses nothing)."""
    if not isinstance(checkpoint, dict) or checkpoint.get("v") != STATE_VERSION:
        return False
    streams = checkpoint.get("streams")
    keys = {"since", "page", "cursor", "done", "seen", "etag", "floor"}
    return (
        isinstance(checkpoint.get("start"), int)
        and isinstance(checkpoint.get("cycle_done"), bool)
        and isinstance(streams, dict)
        and all(isinstance(streams.get(s.name), dict) and keys <= set(streams[s.name]) for s in STREAMS)
    )


def checkpoint_of(state: dict[str, Any]) -> Checkpoint:
    done = all(state["streams"][s.name]["done"] for s in STREAMS)
    state["cycle_done"] = done
    issues = state["streams"]["issues"]
    position = issues["cursor"] if issues["cursor"] is not None else issues["since"]
    return Checkpoint(state=copy.deepcopy(state), cursor=iso(position), has_more=not done)


# ---- the sync ------------------------------------------------------------------------------------


def sync_repo(
    session: GitHubSession, full_name: str, state: dict[str, Any], *, new_only: bool, overlap_s: int = OVERLAP_S
) -> Iterator[SyncEvent]:
    """Pages of every unfinished stream, each followed by a checkpoint; the last one has has_more=False."""
    for stream in STREAMS:
        st = state["streams"][stream.name]
        while not st["done"]:
            yield from _read_page(session, full_name, stream, st, new_only=new_only, overlap_s=overlap_s)
            yield checkpoint_of(state)


def _read_page(
    session: GitHubSession, full_name: str, stream: Stream, st: dict[str, Any], *, new_only: bool, overlap_s: int
) -> Iterator[SyncEvent]:
    params: dict[str, str | int] = {
        **stream.params,
        "since": iso(st["since"]),
        "sort": "updated",
        "direction": "asc",
        "per_page": PER_PAGE,
    }
    if st["page"] > 1:
        params["page"] = st["page"]
    cached = st["etag"]
    etag = cached[1] if cached and cached[0] == st["since"] and st["page"] == 1 else None
    reply = session.get(f"/repos/{full_name}{stream.path}", params, etag=etag)
    if reply.status == 304:
        st["done"] = True  # the same query as last cycle, unchanged
        return
    items = reply.data
    if not isinstance(items, list):
        raise ProviderError(f"GitHub sent a {type(items).__name__} for {stream.path}, not a list")
    if st["page"] == 1 and st["since"] == st["floor"]:  # the cycle's first request: the next cycle may repeat it
        st["etag"] = [st["since"], reply.etag] if reply.etag and len(items) < PER_PAGE else None
    seen: dict[str, int] = st["seen"]
    newest: int | None = None
    for item in items:
        key = str(item.get("id")) if isinstance(item, dict) else ""
        updated = _updated(item)
        if updated is None:
            yield ObjectFailure(None, f"GitHub {stream.name} item without updated_at (id {key or '?'})")
            continue
        newest = updated if newest is None else max(newest, updated)
        previous = seen.get(key)
        seen[key] = updated
        if previous == updated:
            continue  # this version was yielded already (overlap window, keyset boundary)
        if new_only and (previous is not None or (_created(item) or 0) < st["floor"]):
            continue
        yield stream.mapper(full_name, item)
    if newest is not None:
        st["cursor"] = newest if st["cursor"] is None else max(st["cursor"], newest)
    if len(items) < PER_PAGE:
        st["done"] = True
    elif newest is None or newest <= st["since"]:
        st["page"] += 1  # a whole page inside one second: step through it
    else:
        st["since"], st["page"] = newest, 1
    if st["cursor"] is not None:
        cutoff = st["cursor"] - overlap_s
        st["seen"] = {k: v for k, v in seen.items() if v >= cutoff}


def _updated(item: Any) -> int | None:
    try:
        value = epoch(item.get("updated_at")) if isinstance(item, dict) else None
    except (TypeError, ValueError):
        return None
    return int(value) if value is not None else None


def _created(item: dict[str, Any]) -> int | None:
    try:
        value = epoch(item.get("created_at"))
    except (TypeError, ValueError):
        return None
    return int(value) if value is not None else None


# ---- reconcile -----------------------------------------------------------------------------------


def existing_ids(session: GitHubSession, full_name: str, since: float | None, known: list[str]) -> list[str]:
    """Native ids that exist now among the repo's issues, PRs and comments created at or after `since`
    (all when None), as far as `known` (the ids the service holds) needs: a stream with no known object is
    not listed, and a stream's listing stops once all its known objects have been seen.

    Cost: at most one request per 100 objects per stream created in the range (newest first, stopping at
    `since`): a 2,000-issue repository with 4,000 comments lists in about 60 requests, about 1 % of an
    hour's budget. Each known object the listing did not show is then fetched alone (up to
    VERIFY_MISSING_MAX per stream): only a 404/410 counts as deleted. That costs one request per deletion
    and closes the race of offset pages, where an object deleted during the listing shifts its
    neighbour past a page boundary. Any other error raises: a partial list must never look like deletions.
    """
    ids: list[str] = []
    for stream in STREAMS:
        wanted = {k for k in known if _stream_of(k) == stream.name}
        page = 1
        while wanted:
            params: dict[str, str | int] = {
                **stream.params,
                "sort": "created",
                "direction": "desc",
                "per_page": PER_PAGE,
                "page": page,
            }
            reply = session.get(f"/repos/{full_name}{stream.path}", params)
            if not isinstance(reply.data, list):
                raise ProviderError(f"GitHub sent a {type(reply.data).__name__} for {stream.path}, not a list")
            reached_since = False
            for item in reply.data:
                try:
                    created = epoch(item["created_at"])
                    native_id = stream.native_id(full_name, item)
                except (KeyError, TypeError, ValueError):
                    raise ProviderError(f"GitHub {stream.name} item without id or created_at") from None
                if since is not None and created is not None and created < since:
                    reached_since = True
                    break
                ids.append(native_id)
                wanted.discard(native_id)
            if reached_since or reply.next_page is None:
                break
            page = reply.next_page
        if len(wanted) <= VERIFY_MISSING_MAX:  # more looks like a mass deletion: the listing stands
            ids += [native_id for native_id in sorted(wanted) if _still_there(session, full_name, native_id)]
    return ids


class _Gone(ProviderError):
    pass


def _still_there(session: GitHubSession, full_name: str, native_id: str) -> bool:
    """One GET of a single object: False on 404/410 (deleted), or when it now lives in another repository."""
    number = native_id.rsplit("#", 1)[1]
    if number.startswith("issuecomment-"):
        path = f"/repos/{full_name}/issues/comments/{number.removeprefix('issuecomment-')}"
    elif number.startswith("discussion_r"):
        path = f"/repos/{full_name}/pulls/comments/{number.removeprefix('discussion_r')}"
    else:
        path = f"/repos/{full_name}/issues/{number}"
    try:
        data = session.get(path, missing=_Gone).data
    except _Gone:
        return False
    # A transferred issue answers through a redirect from its new repository.
    url = str(data.get("html_url") or "") if isinstance(data, dict) else ""
    return f"/{full_name.lower()}/" in url.lower()


def _stream_of(native_id: str) -> str:
    if "#issuecomment-" in native_id:
        return "issue_comments"
    if "#discussion_r" in native_id:
        return "review_comments"
    return "issues"
