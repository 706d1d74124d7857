"""graphql-core resolvers of the fake Linear API: Relay connections, filters, and views over the fake's tables."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLError, GraphQLResolveInfo

from tests.fakes.linear_api import (
    MAX_FIRST,
    PRIORITY_LABELS,
    STATES,
    FakeComment,
    FakeIssue,
    FakeLinear,
    FakeRelation,
    FakeTeam,
    FakeUser,
    iso,
    parse_ms,
)


def resolve_field(obj: Any, info: GraphQLResolveInfo, **args: Any) -> Any:
    if isinstance(obj, dict):
        return obj.get(info.field_name)
    return obj.field(info.field_name, args, info.context)


def _not_found(kind: str) -> GraphQLError:
    return GraphQLError(
        f"Entity not found: {kind} - Could not find referenced {kind}.",
        extensions={"code": "INVALID_INPUT", "statusCode": 400, "userError": True},
    )


def _cursor(key: int, ident: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([key, ident]).encode()).decode()


def _connection(fake: FakeLinear, items: list[Any], args: dict[str, Any], node: Callable[[Any], Any]) -> dict[str, Any]:
    """A Relay connection over `items` (objects with created_at, updated_at, id), newest first by orderBy."""
    if args.get("last") is not None or args.get("before") is not None:
        raise GraphQLError("fake: last/before are not modelled", extensions={"code": "INVALID_INPUT"})
    first = 50 if args.get("first") is None else int(args["first"])
    if not 0 < first <= MAX_FIRST:
        raise GraphQLError(f"first must be between 1 and {MAX_FIRST}", extensions={"code": "INVALID_INPUT"})
    order = "updated_at" if args.get("orderBy") == "updatedAt" else "created_at"
    keyed = sorted(((getattr(i, order), i.id), i) for i in items)
    keyed.reverse()
    if args.get("after"):
        try:
            key, ident = json.loads(base64.urlsafe_b64decode(str(args["after"]).encode()))
        except (ValueError, TypeError):
            raise GraphQLError("Invalid cursor", extensions={"code": "INVALID_INPUT"}) from None
        keyed = [(k, i) for k, i in keyed if k < (key, ident)]
    page = keyed[: min(first, fake.page_cap)]
    end = _cursor(*page[-1][0]) if page else None
    return {
        "nodes": [node(i) for _, i in page],
        "edges": [{"cursor": _cursor(*k), "node": node(i)} for k, i in page],
        "pageInfo": {
            "hasNextPage": len(keyed) > len(page),
            "hasPreviousPage": bool(args.get("after")),
            "startCursor": _cursor(*page[0][0]) if page else None,
            "endCursor": end,
        },
    }


def _compare(value: Any, comparator: dict[str, Any] | None, convert: Callable[[Any], Any] = lambda v: v) -> bool:
    if not comparator:
        return True
    for op, raw in comparator.items():
        if raw is None:
            continue
        if op in ("in", "nin"):
            members = {convert(x) for x in raw}
            if (value in members) != (op == "in"):
                return False
            continue
        target = convert(raw)
        ok = {
            "eq": value == target,
            "neq": value != target,
            "gt": value is not None and value > target,
            "gte": value is not None and value >= target,
            "lt": value is not None and value < target,
            "lte": value is not None and value <= target,
        }.get(op)
        if ok is None:
            raise GraphQLError(f"fake: comparator {op} not modelled", extensions={"code": "INVALID_INPUT"})
        if not ok:
            return False
    return True


def _combined(filt: dict[str, Any], match: Callable[[dict[str, Any]], bool]) -> bool:
    if filt.get("and") and not all(match(f) for f in filt["and"]):
        return False
    return not (filt.get("or") and not any(match(f) for f in filt["or"]))


class Root:
    def __init__(self, fake: FakeLinear) -> None:
        self.fake = fake

    def field(self, name: str, args: dict[str, Any], user: FakeUser) -> Any:
        fake = self.fake
        if name == "viewer":
            return _UserView(user)
        if name == "organization":
            return dict(fake.org)
        if name == "team":
            if not fake.visible_team(user, str(args["id"])):
                raise _not_found("Team")
            return _TeamView(fake, fake.teams[str(args["id"])], user)
        if name == "teams":
            teams = [t for t in fake.teams.values() if fake.visible_team(user, t.id)]
            teams = [t for t in teams if args.get("includeArchived") or t.archived_at is None]
            teams = [t for t in teams if _team_matches(t, args.get("filter"))]
            return _connection(fake, teams, args, lambda t: _TeamView(fake, t, user))
        if name == "issue":
            issue = fake.issues.get(str(args["id"]))
            if issue is None or not fake.visible_team(user, issue.team_id):
                raise _not_found("Issue")
            return _IssueView(fake, issue, user)
        if name == "issues":
            found = [i for i in fake.issues.values() if _visible_issue(fake, user, i, args)]
            found = [i for i in found if _issue_matches(fake, i, args.get("filter"))]
            return _connection(fake, found, args, lambda i: _IssueView(fake, i, user))
        if name in ("comments", "comment"):
            found = [c for c in fake.comments.values() if _visible_comment(fake, user, c, args)]
            if name == "comment":
                hit = [c for c in found if c.id == args.get("id")]
                if not hit:
                    raise _not_found("Comment")
                return _CommentView(fake, hit[0], user)
            found = [c for c in found if _comment_matches(fake, c, args.get("filter"))]
            return _connection(fake, found, args, lambda c: _CommentView(fake, c, user))
        raise GraphQLError(f"fake: Query.{name} is not modelled")


def _visible_issue(fake: FakeLinear, user: FakeUser, issue: FakeIssue, args: dict[str, Any]) -> bool:
    archived = issue.archived_at is not None or issue.trashed
    return fake.visible_team(user, issue.team_id) and (bool(args.get("includeArchived")) or not archived)


def _visible_comment(fake: FakeLinear, user: FakeUser, comment: FakeComment, args: dict[str, Any]) -> bool:
    issue = fake.issues.get(comment.issue_id)
    if issue is None or not fake.visible_team(user, issue.team_id):
        return False
    archived = comment.archived_at is not None or issue.archived_at is not None or issue.trashed
    return bool(args.get("includeArchived")) or not archived


def _team_matches(team: FakeTeam, filt: dict[str, Any] | None) -> bool:
    if not filt:
        return True
    return (
        _compare(team.id, filt.get("id"))
        and _compare(team.key, filt.get("key"))
        and _compare(team.name, filt.get("name"))
        and _compare(team.private, filt.get("private"))
        and _compare(team.created_at, filt.get("createdAt"), parse_ms)
        and _compare(team.updated_at, filt.get("updatedAt"), parse_ms)
        and _combined(filt, lambda f: _team_matches(team, f))
    )


def _issue_matches(fake: FakeLinear, issue: FakeIssue | None, filt: dict[str, Any] | None) -> bool:
    if not filt:
        return True
    if "null" in filt and filt["null"] is not None:
        return (issue is None) == bool(filt["null"])
    if issue is None:
        return False
    parent = fake.issues.get(issue.parent_id) if issue.parent_id else None
    return (
        _compare(issue.id, filt.get("id"))
        and _compare(issue.created_at, filt.get("createdAt"), parse_ms)
        and _compare(issue.updated_at, filt.get("updatedAt"), parse_ms)
        and (filt.get("team") is None or _team_matches(fake.teams[issue.team_id], filt["team"]))
        and (filt.get("parent") is None or _issue_matches(fake, parent, filt["parent"]))
        and _combined(filt, lambda f: _issue_matches(fake, issue, f))
    )


def _comment_matches(fake: FakeLinear, comment: FakeComment, filt: dict[str, Any] | None) -> bool:
    if not filt:
        return True
    parent_filter = filt.get("parent") or {}
    if parent_filter.get("null") is not None and (comment.parent_id is None) != parent_filter["null"]:
        return False
    return (
        _compare(comment.id, filt.get("id"))
        and _compare(comment.created_at, filt.get("createdAt"), parse_ms)
        and _compare(comment.updated_at, filt.get("updatedAt"), parse_ms)
        and _compare(comment.parent_id, parent_filter.get("id"))
        and (filt.get("issue") is None or _issue_matches(fake, fake.issues.get(comment.issue_id), filt["issue"]))
        and _combined(filt, lambda f: _comment_matches(fake, comment, f))
    )


class _UserView:
    def __init__(self, user: FakeUser) -> None:
        self.user = user

    def field(self, name: str, args: dict[str, Any], viewer: FakeUser) -> Any:
        u = self.user
        return {"id": u.id, "name": u.name, "displayName": u.name.split()[0].lower(), "email": u.email, "active": True}[
            name
        ]


class _TeamView:
    def __init__(self, fake: FakeLinear, team: FakeTeam, user: FakeUser) -> None:
        self.fake, self.team, self.user = fake, team, user

    def field(self, name: str, args: dict[str, Any], viewer: FakeUser) -> Any:
        t = self.team
        if name == "issueCount":
            mine = [i for i in self.fake.issues.values() if i.team_id == t.id]
            return len([i for i in mine if args.get("includeArchived") or (i.archived_at is None and not i.trashed)])
        return {
            "id": t.id,
            "key": t.key,
            "name": t.name,
            "displayName": t.name,
            "description": t.description or None,
            "private": t.private,
            "archivedAt": iso(t.archived_at),
            "createdAt": iso(t.created_at),
            "updatedAt": iso(t.updated_at),
        }[name]


class _IssueView:
    def __init__(self, fake: FakeLinear, issue: FakeIssue, user: FakeUser) -> None:
        self.fake, self.issue, self.user = fake, issue, user

    def field(self, name: str, args: dict[str, Any], viewer: FakeUser) -> Any:
        fake, i = self.fake, self.issue
        users = fake.users
        if name in ("relations", "inverseRelations"):
            mine = [
                r
                for r in fake.relations.values()
                if (r.issue_id if name == "relations" else r.related_id) == i.id
                and r.issue_id in fake.issues
                and r.related_id in fake.issues
                and (args.get("includeArchived") or r.archived_at is None)
            ]
            return _connection(fake, mine, args, lambda r: _RelationView(fake, r, viewer))
        if name == "labels":
            labels = [_Label(fake.labels[n], n, i.created_at) for n in i.labels]
            return _connection(fake, labels, args, lambda label: {"id": label.id, "name": label.name, "color": "#888"})
        if name == "children":
            kids = [c for c in fake.issues.values() if c.parent_id == i.id and _visible_issue(fake, viewer, c, args)]
            kids = [c for c in kids if _issue_matches(fake, c, args.get("filter"))]
            return _connection(fake, kids, args, lambda c: _IssueView(fake, c, viewer))
        if name == "comments":
            mine = [c for c in fake.comments.values() if c.issue_id == i.id and _visible_comment(fake, viewer, c, args)]
            mine = [c for c in mine if _comment_matches(fake, c, args.get("filter"))]
            return _connection(fake, mine, args, lambda c: _CommentView(fake, c, viewer))
        if name == "parent":
            parent = fake.issues.get(i.parent_id) if i.parent_id else None
            return _IssueView(fake, parent, viewer) if parent is not None else None
        if name == "team":
            return _TeamView(fake, fake.teams[i.team_id], viewer)
        if name in ("creator", "assignee"):
            uid = i.creator_id if name == "creator" else i.assignee_id
            return _UserView(users[uid]) if uid in users else None
        if name == "state":
            return {"id": f"state-{i.state}", "name": i.state, "type": STATES[i.state], "color": "#000"}
        return {
            "id": i.id,
            "identifier": fake.identifier(i),
            "number": float(i.number),
            "title": i.title,
            "description": i.description or None,
            "url": fake.issue_url(i),
            "priority": float(i.priority),
            "priorityLabel": PRIORITY_LABELS[i.priority],
            "createdAt": iso(i.created_at),
            "updatedAt": iso(i.updated_at),
            "archivedAt": iso(i.archived_at),
            "trashed": True if i.trashed else None,
            "canceledAt": None,
            "completedAt": iso(i.updated_at) if STATES[i.state] == "completed" else None,
            "dueDate": None,
            "estimate": None,
            "previousIdentifiers": list(i.previous_identifiers),
        }[name]


@dataclass
class _Label:
    id: str
    name: str
    created_at: int

    @property
    def updated_at(self) -> int:
        return self.created_at


class _RelationView:
    def __init__(self, fake: FakeLinear, relation: FakeRelation, user: FakeUser) -> None:
        self.fake, self.relation, self.user = fake, relation, user

    def field(self, name: str, args: dict[str, Any], viewer: FakeUser) -> Any:
        r = self.relation
        if name in ("issue", "relatedIssue"):
            return _IssueView(self.fake, self.fake.issues[r.issue_id if name == "issue" else r.related_id], viewer)
        return {
            "id": r.id,
            "type": r.type,
            "createdAt": iso(r.created_at),
            "updatedAt": iso(r.updated_at),
            "archivedAt": iso(r.archived_at),
        }[name]


class _CommentView:
    def __init__(self, fake: FakeLinear, comment: FakeComment, user: FakeUser) -> None:
        self.fake, self.comment, self.user = fake, comment, user

    def field(self, name: str, args: dict[str, Any], viewer: FakeUser) -> Any:
        fake, c = self.fake, self.comment
        if name == "issue":
            issue = fake.issues.get(c.issue_id)
            return _IssueView(fake, issue, viewer) if issue is not None else None
        if name == "parent":
            parent = fake.comments.get(c.parent_id) if c.parent_id else None
            return _CommentView(fake, parent, viewer) if parent is not None else None
        if name == "user":
            return _UserView(fake.users[c.user_id]) if c.user_id in fake.users else None
        if name == "botActor":
            return {"id": None, "name": c.bot_name, "type": "apiKey"} if c.bot_name else None
        if name == "children":
            kids = [k for k in fake.comments.values() if k.parent_id == c.id]
            return _connection(fake, kids, args, lambda k: _CommentView(fake, k, viewer))
        issue = fake.issues.get(c.issue_id)
        base = fake.issue_url(issue) if issue is not None else "https://linear.app"
        return {
            "id": c.id,
            "body": c.body,
            "url": f"{base}#comment-{c.id[:8]}",
            "createdAt": iso(c.created_at),
            "updatedAt": iso(c.updated_at),
            "editedAt": iso(c.edited_at),
            "archivedAt": iso(c.archived_at),
            "issueId": c.issue_id,
            "parentId": c.parent_id,
            "resolvedAt": None,
        }[name]
