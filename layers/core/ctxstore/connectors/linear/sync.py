"""Incremental sync of one Linear team: issues and comments changed in a time window, paged by cursor, with a
checkpoint after every page; archived and trashed issues become deletions.

Queries (the documents below; Linear's schema names): ``issues`` and ``comments`` with
``filter: {updatedAt: {gte: since, lte: until}}`` (comments through ``issue: {team: ...}``),
``orderBy: updatedAt``, ``includeArchived: true``, ``first`` and ``after: pageInfo.endCursor``.

Windows, not open-ended cursors: a cycle reads the changes in ``[since, until]``, ``until`` being the
service's clock when the cycle opened. Linear orders by ``updatedAt`` newest first; an object edited while
a cycle pages through its window moves above ``until`` (out of the window, so it cannot shift a page
boundary and make the pager skip anything) and is read by the next cycle, whose window starts at
``until - OVERLAP_S``. The overlap absorbs clock skew between this server and Linear; objects seen in the
overlap at the same ``updatedAt`` are not yielded twice (``seen``, pruned to the overlap). A checkpoint
stores the window and the ``endCursor`` of the last page read, so a chunked first sync and a resumed
sync continue where they stopped; a cursor Linear refuses on resume restarts the window once (a re-read is
an upsert).

Deletions: an issue that is archived or in the trash comes back through ``includeArchived: true`` with
``archivedAt``/``trashed``: it is yielded as ``DeletedObject`` together with every comment of it (one
``comments`` query per such issue), and remembered (``gone``), so that restoring it from the trash brings
its comments back too. A comment archived, or on an archived/trashed issue, is a ``DeletedObject``.
Objects deleted for good (a comment deleted, an issue purged from the trash) leave no trace in a list:
``existing_ids`` answers reconcile by asking for the known ids themselves (``filter: {id: {in: [...]}}``,
one request per 50 known objects) and reports alive only what is there and neither archived nor trashed.
An issue moved to another team still exists, so the team it left does not delete the item the other team
now owns (same id: native ids are Linear ids, not identifiers).

Limits (documented in docs/connectors.md): the first 10 labels and 20 relations of each direction per
issue; a relation added without either issue changing arrives with the next change of either issue.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.linear.mapping import (
    JSON,
    comment_native_id,
    epoch_ms,
    is_gone,
    issue_native_id,
    map_comment,
    map_issue,
)
from ctxstore.ports.connector_provider import (
    Checkpoint,
    DeletedObject,
    ObjectFailure,
    ProviderError,
    ResourceUnavailable,
    SyncEvent,
)

if TYPE_CHECKING:
    from ctxstore.connectors.linear.client import LinearSession

PAGE = 50  # Linear's default page; with the nested lists below a page stays far under 10,000 complexity points
EXISTS_BATCH = 50  # known ids asked per reconcile request
OVERLAP_S = 600
MAX_GONE = 2000  # removed issues remembered, so a restore brings their comments back
STATE_VERSION = 1
STREAMS = ("issues", "comments")

ISSUE_FIELDS = """
fragment IssueFields on Issue {
  id identifier number title description url priorityLabel createdAt updatedAt archivedAt trashed
  state { name type }
  team { id key }
  parent { id identifier }
  creator { name displayName }
  assignee { name displayName }
  labels(first: 10) { nodes { name } }
  relations(first: 20) { nodes { type archivedAt relatedIssue { id identifier } } }
  inverseRelations(first: 20) { nodes { type archivedAt issue { id identifier } } }
}
"""

COMMENT_FIELDS = """
fragment CommentFields on Comment {
  id body url createdAt updatedAt archivedAt
  user { name displayName }
  botActor { name }
  parent { id }
  issue { id identifier title archivedAt trashed }
}
"""

TEAM_ISSUES = (
    """
query TeamIssues($teamId: String!, $team: ID!, $since: DateTimeOrDuration!, $until: DateTimeOrDuration!,
                 $first: Int!, $after: String) {
  team(id: $teamId) { id key }
  issues(first: $first, after: $after, orderBy: updatedAt, includeArchived: true,
         filter: {team: {id: {eq: $team}}, updatedAt: {gte: $since, lte: $until}}) {
    nodes { ...IssueFields }
    pageInfo { hasNextPage endCursor }
  }
}
"""
    + ISSUE_FIELDS
)

TEAM_COMMENTS = (
    """
query TeamComments($team: ID!, $since: DateTimeOrDuration!, $until: DateTimeOrDuration!, $first: Int!,
                   $after: String) {
  comments(first: $first, after: $after, orderBy: updatedAt, includeArchived: true,
           filter: {issue: {team: {id: {eq: $team}}}, updatedAt: {gte: $since, lte: $until}}) {
    nodes { ...CommentFields }
    pageInfo { hasNextPage endCursor }
  }
}
"""
    + COMMENT_FIELDS
)

ISSUE_COMMENTS = (
    """
query IssueComments($issue: ID!, $first: Int!, $after: String) {
  comments(first: $first, after: $after, includeArchived: true, filter: {issue: {id: {eq: $issue}}}) {
    nodes { ...CommentFields }
    pageInfo { hasNextPage endCursor }
  }
}
"""
    + COMMENT_FIELDS
)

EXISTING_ISSUES = """
query ExistingIssues($ids: [ID!]!, $first: Int!) {
  issues(first: $first, includeArchived: true, filter: {id: {in: $ids}}) { nodes { id archivedAt trashed } }
}
"""

EXISTING_COMMENTS = """
query ExistingComments($ids: [ID!]!, $first: Int!) {
  comments(first: $first, includeArchived: true, filter: {id: {in: $ids}}) {
    nodes { id archivedAt issue { id archivedAt trashed } }
  }
}
"""

PROBE = """
query Probe($teamId: String!, $team: ID!, $since: DateTimeOrDuration!) {
  team(id: $teamId) { id }
  issues(first: 1, filter: {team: {id: {eq: $team}}, updatedAt: {gte: $since}}) { nodes { id } }
  comments(first: 1, filter: {issue: {team: {id: {eq: $team}}}, updatedAt: {gte: $since}}) { nodes { id } }
}
"""


def iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


# ---- checkpoint state ----------------------------------------------------------------------------


def begin_cycle(checkpoint: dict[str, Any] | None, start_s: float, now_s: float) -> dict[str, Any]:
    """The state to sync from: resume an unfinished cycle as is, or open the next window from the last one."""
    now_ms, start_ms = int(now_s * 1000), int(start_s * 1000)
    if not _valid(checkpoint):
        return {
            "v": STATE_VERSION,
            "start": start_ms,
            "until": max(now_ms, start_ms),
            "first_cycle": True,
            "cycle_done": False,
            "streams": {s: _fresh_stream(start_ms) for s in STREAMS},
            "gone": [],
        }
    assert checkpoint is not None
    state = copy.deepcopy(checkpoint)
    if state["cycle_done"]:
        since = max(state["start"], state["until"] - OVERLAP_S * 1000)
        state.update(until=max(now_ms, since), first_cycle=False, cycle_done=False)
        for name, st in state["streams"].items():
            seen = {k: v for k, v in st["seen"].items() if v >= since}
            state["streams"][name] = {**_fresh_stream(since), "seen": seen}
    return state


def _fresh_stream(since_ms: int) -> dict[str, Any]:
    return {"since": since_ms, "after": None, "done": False, "restarted": False, "seen": {}}


def _valid(checkpoint: dict[str, Any] | None) -> bool:
    """A checkpoint this code wrote (an unknown one restarts from `start`: a resync upserts, it loses nothing)."""
    if not isinstance(checkpoint, dict) or checkpoint.get("v") != STATE_VERSION:
        return False
    streams = checkpoint.get("streams")
    keys = {"since", "after", "done", "restarted", "seen"}
    return (
        all(isinstance(checkpoint.get(k), int) for k in ("start", "until"))
        and isinstance(checkpoint.get("cycle_done"), bool)
        and isinstance(checkpoint.get("gone"), list)
        and isinstance(streams, dict)
        and all(isinstance(streams.get(s), dict) and keys <= set(streams[s]) for s in STREAMS)
    )


def checkpoint_of(state: dict[str, Any]) -> Checkpoint:
    done = all(state["streams"][s]["done"] for s in STREAMS)
    state["cycle_done"] = done
    # Caught up: every change up to `until` is read. Mid-cycle: the window's start is where it resumes.
    position = state["until"] if done else min(state["streams"][s]["since"] for s in STREAMS)
    return Checkpoint(state=copy.deepcopy(state), cursor=iso_ms(position), has_more=not done)


# ---- the sync ------------------------------------------------------------------------------------


def sync_team(session: LinearSession, team_id: str, state: dict[str, Any], *, new_only: bool) -> Iterator[SyncEvent]:
    """Pages of issues, then of comments, each followed by a checkpoint; the last one has has_more=False."""
    for stream in STREAMS:
        st = state["streams"][stream]
        while not st["done"]:
            yield from _read_page(session, team_id, stream, st, state, new_only=new_only)
            yield checkpoint_of(state)


def _read_page(
    session: LinearSession,
    team_id: str,
    stream: str,
    st: dict[str, Any],
    state: dict[str, Any],
    *,
    new_only: bool,
) -> Iterator[SyncEvent]:
    connection = _fetch_page(session, team_id, stream, st, state)
    if connection is None:
        return
    floor = st["since"] if new_only and not state["first_cycle"] else None
    restored: list[str] = []
    for node in connection["nodes"]:
        yield from _node_events(session, stream, node, st, state, restored, floor)
    for issue_id in restored:  # back from the trash or unarchived: its comments come back with it
        for comment in _comments_of(session, issue_id):
            if not is_gone(comment):
                yield map_comment(comment)
    info = connection.get("pageInfo") if isinstance(connection.get("pageInfo"), dict) else {}
    cursor = (info or {}).get("endCursor")
    if (info or {}).get("hasNextPage") and cursor:
        st["after"] = str(cursor)
    else:
        st["done"] = True
    cutoff = state["until"] - OVERLAP_S * 1000  # only the next window's overlap needs dedupe
    st["seen"] = {k: v for k, v in st["seen"].items() if v >= cutoff}


def _fetch_page(
    session: LinearSession, team_id: str, stream: str, st: dict[str, Any], state: dict[str, Any]
) -> dict[str, Any] | None:
    """One page of the stream's connection; None when Linear refused the stored cursor (read the window again)."""
    variables: JSON = {
        "team": team_id,
        "since": iso_ms(st["since"]),
        "until": iso_ms(state["until"]),
        "first": PAGE,
        "after": st["after"],
    }
    if stream == "issues":
        document, operation = TEAM_ISSUES, "TeamIssues"
        variables["teamId"] = team_id
    else:
        document, operation = TEAM_COMMENTS, "TeamComments"
    try:
        data = session.query(
            document, variables, operation=operation, forbidden=ResourceUnavailable, missing=ResourceUnavailable
        )
    except ProviderError as exc:
        if type(exc) is not ProviderError or st["after"] is None or st["restarted"]:
            raise
        st.update(after=None, restarted=True)
        return None
    if stream == "issues" and not isinstance(data.get("team"), dict):
        raise ResourceUnavailable(f"Linear team {team_id} is not visible to these credentials")
    connection = data.get(stream)
    if not isinstance(connection, dict) or not isinstance(connection.get("nodes"), list):
        raise ProviderError(f"Linear answered {operation} without {stream}.nodes")
    return connection


def _node_events(
    session: LinearSession,
    stream: str,
    node: Any,
    st: dict[str, Any],
    state: dict[str, Any],
    restored: list[str],
    floor: int | None,
) -> Iterator[SyncEvent]:
    updated = epoch_ms(node.get("updatedAt")) if isinstance(node, dict) else None
    key = str(node.get("id") or "") if isinstance(node, dict) else ""
    if not key or updated is None:
        yield ObjectFailure(None, f"Linear {stream} node without id or updatedAt")
        return
    if st["seen"].get(key) == updated:
        return  # this version was yielded already (overlap, a re-read window)
    st["seen"][key] = updated
    if stream == "issues":
        yield from _issue_events(session, node, state, restored, floor)
    elif is_gone(node) or not isinstance(node.get("issue"), dict) or is_gone(node["issue"]):
        yield DeletedObject(comment_native_id(key))
    elif floor is None or (epoch_ms(node.get("createdAt")) or 0) >= floor:
        yield map_comment(node)


def _issue_events(
    session: LinearSession, node: JSON, state: dict[str, Any], restored: list[str], floor: int | None
) -> Iterator[SyncEvent]:
    key = str(node["id"])
    gone: list[str] = state["gone"]
    if is_gone(node):
        yield DeletedObject(issue_native_id(key))
        for comment in _comments_of(session, key):
            yield DeletedObject(comment_native_id(str(comment["id"])))
        if key not in gone:
            gone.append(key)
            del gone[:-MAX_GONE]
        return
    if key in gone:
        gone.remove(key)
        restored.append(key)
    if floor is None or (epoch_ms(node.get("createdAt")) or 0) >= floor:
        yield map_issue(node)


def _comments_of(session: LinearSession, issue_id: str) -> Iterator[JSON]:
    """Every comment of one issue, archived ones included (for a removed or restored issue)."""
    after: str | None = None
    while True:
        data = session.query(
            ISSUE_COMMENTS, {"issue": issue_id, "first": PAGE, "after": after}, operation="IssueComments"
        )
        connection = data.get("comments") if isinstance(data.get("comments"), dict) else {}
        for comment in (connection or {}).get("nodes") or []:
            if isinstance(comment, dict) and comment.get("id"):
                yield comment
        info = (connection or {}).get("pageInfo") or {}
        if not info.get("hasNextPage") or not info.get("endCursor"):
            return
        after = str(info["endCursor"])


# ---- probe and reconcile -------------------------------------------------------------------------


def anything_since(session: LinearSession, team_id: str, since_s: float) -> bool:
    variables = {"teamId": team_id, "team": team_id, "since": iso_ms(int(since_s * 1000))}
    data = session.query(
        PROBE, variables, operation="Probe", forbidden=ResourceUnavailable, missing=ResourceUnavailable
    )
    return any(((data.get(k) or {}).get("nodes") or []) for k in STREAMS)


def existing_ids(session: LinearSession, known: list[str]) -> list[str]:
    """The known native ids whose object exists at Linear and is neither archived nor trashed (nor on such an
    issue). Asks for the ids themselves, so an object purged for good is the one thing missing. Any error
    raises: a partial answer must never look like deletions."""
    alive: list[str] = []
    for prefix, document, operation in (
        ("issue_", EXISTING_ISSUES, "ExistingIssues"),
        ("comment_", EXISTING_COMMENTS, "ExistingComments"),
    ):
        ids = sorted(k.removeprefix(prefix) for k in known if k.startswith(prefix))
        for i in range(0, len(ids), EXISTS_BATCH):
            batch = ids[i : i + EXISTS_BATCH]
            data = session.query(document, {"ids": batch, "first": len(batch)}, operation=operation)
            connection = data.get("issues" if prefix == "issue_" else "comments")
            if not isinstance(connection, dict) or not isinstance(connection.get("nodes"), list):
                raise ProviderError(f"Linear answered {operation} without nodes")
            for node in connection["nodes"]:
                if not isinstance(node, dict) or not node.get("id") or is_gone(node):
                    continue
                if prefix == "comment_" and (not isinstance(node.get("issue"), dict) or is_gone(node["issue"])):
                    continue
                alive.append(prefix + str(node["id"]))
    return alive
