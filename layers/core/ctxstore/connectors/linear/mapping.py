"""Linear GraphQL nodes -> synced objects: issues (with sub-issues and relations) and threaded comments.

Native ids are Linear's own ids with a type prefix, ``issue_<uuid>`` and ``comment_<uuid>``: an issue's
identifier (``ENG-12``) changes when the issue moves to another team, its id never does. The identifier
is kept in ``native_fields["linear_identifier"]`` (the reference's "native id" of Linear objects).

Graph:
- an issue is its own thread; a sub-issue's parent is its parent issue (``parent_id``, plus a ``child_of``
  link), so the subgraph read of a parent finds its children and theirs;
- relations become links from both ends: ``issue.relations`` (this issue is the relation's subject) give
  ``blocks``, ``duplicate`` (this is a duplicate of), ``related``, ``similar``; ``issue.inverseRelations``
  give the other direction ``blocked_by``, ``duplicated_by``, ``related``, ``similar``;
- a comment's thread is its issue (``comment_on`` link); its parent is the comment it replies to
  (``Comment.parent``, plus ``reply_to``), else the issue.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ctxstore.ports.connector_provider import ObjectFailure, ObjectLink, SyncedObject

JSON = dict[str, Any]
# relations/inverseRelations type -> (link from the subject, link from the related issue)
RELATION_NAMES = {
    "blocks": ("blocks", "blocked_by"),
    "duplicate": ("duplicate", "duplicated_by"),
    "related": ("related", "related"),
    "similar": ("similar", "similar"),
}


def issue_native_id(issue_id: str) -> str:
    return f"issue_{issue_id}"


def comment_native_id(comment_id: str) -> str:
    return f"comment_{comment_id}"


def epoch(value: object) -> float | None:
    """Linear's ISO 8601 timestamps (``2026-01-01T00:00:00.000Z``) as epoch seconds."""
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() if value else None


def epoch_ms(value: object) -> int | None:
    seconds = epoch(value)
    return None if seconds is None else round(seconds * 1000)


def is_gone(node: JSON) -> bool:
    """Archived or in the trash (deleted issues stay in the trash for 30 days): removed here."""
    return bool(node.get("archivedAt")) or node.get("trashed") is True


def _name(user: object) -> str | None:
    if not isinstance(user, dict):
        return None
    return str(user.get("displayName") or user.get("name") or "") or None


def _nodes(connection: object) -> list[JSON]:
    nodes = connection.get("nodes") if isinstance(connection, dict) else None
    return [n for n in nodes or [] if isinstance(n, dict)]


def _integer(value: object) -> int | None:
    """Linear types issue numbers as Float; they are whole."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def relation_links(issue: JSON) -> tuple[list[ObjectLink], list[str]]:
    """Links to related issues from both relation lists, and a readable summary ('blocks ENG-7')."""
    links: list[ObjectLink] = []
    summary: list[str] = []
    for key, side, other in (("relations", 0, "relatedIssue"), ("inverseRelations", 1, "issue")):
        for rel in _nodes(issue.get(key)):
            target = rel.get(other)
            names = RELATION_NAMES.get(str(rel.get("type")))
            if not isinstance(target, dict) or not target.get("id") or names is None or rel.get("archivedAt"):
                continue
            name = names[side]
            links.append(ObjectLink(issue_native_id(str(target["id"])), name))
            summary.append(f"{name.replace('_', ' ')} {target.get('identifier') or target['id']}")
    return links, summary


def map_issue(issue: JSON) -> SyncedObject | ObjectFailure:
    try:
        native_id = issue_native_id(str(issue["id"]))
        identifier = str(issue["identifier"])
        title = str(issue.get("title") or "")
        state = issue.get("state") if isinstance(issue.get("state"), dict) else {}
        team = issue.get("team") if isinstance(issue.get("team"), dict) else {}
        parent = issue.get("parent") if isinstance(issue.get("parent"), dict) else None
        labels = [str(label["name"]) for label in _nodes(issue.get("labels")) if label.get("name")]
        assignee, author = _name(issue.get("assignee")), _name(issue.get("creator"))
        links, related = relation_links(issue)
        if parent and parent.get("id"):
            links.insert(0, ObjectLink(issue_native_id(str(parent["id"])), "child_of"))
        facts = [f"Issue {identifier}", f"{(state or {}).get('name') or '?'} ({(state or {}).get('type') or '?'})"]
        if issue.get("priorityLabel"):
            facts.append(f"priority {issue['priorityLabel']}")
        if labels:
            facts.append("labels: " + ", ".join(labels))
        if assignee:
            facts.append(f"assignee {assignee}")
        if author:
            facts.append(f"created by {author}")
        if parent:
            facts.append(f"sub-issue of {parent.get('identifier') or parent.get('id')}")
        facts += related
        description = str(issue.get("description") or "")
        fields: JSON = {
            "linear_issue_id": str(issue["id"]),
            "linear_identifier": identifier,
            "linear_number": _integer(issue.get("number")),
            "linear_team_key": (team or {}).get("key"),
            "linear_state": (state or {}).get("name"),
            "linear_state_type": (state or {}).get("type"),
            "linear_priority": issue.get("priorityLabel"),
            "linear_labels": labels,
            "linear_assignee": assignee,
            "linear_author": author,
        }
        if parent:
            fields["linear_parent_identifier"] = parent.get("identifier")
        return SyncedObject(
            native_id=native_id,
            kind="issue",
            title=f"{identifier} {title}".strip(),
            text=f"{identifier} {title}\n\n{' · '.join(facts)}\n\n{description}".rstrip(),
            url=issue.get("url"),
            author=author,
            created_at=epoch(issue.get("createdAt")),
            updated_at=epoch(issue.get("updatedAt")),
            thread_native_id=native_id,
            parent_native_id=issue_native_id(str(parent["id"])) if parent and parent.get("id") else None,
            links=tuple(links),
            native_fields=fields,
        )
    except (KeyError, TypeError, ValueError) as exc:
        key = issue.get("id") if isinstance(issue, dict) else None
        return ObjectFailure(issue_native_id(str(key)) if key else None, f"unreadable Linear issue: {exc!r}")


def map_comment(comment: JSON) -> SyncedObject | ObjectFailure:
    """A comment on an issue: thread = the issue; parent = the comment it replies to, else the issue."""
    try:
        native_id = comment_native_id(str(comment["id"]))
        issue = comment["issue"]
        issue_id = issue_native_id(str(issue["id"]))
        identifier = str(issue.get("identifier") or issue["id"])
        parent = comment.get("parent") if isinstance(comment.get("parent"), dict) else None
        answered = comment_native_id(str(parent["id"])) if parent and parent.get("id") else None
        author = _name(comment.get("user")) or _name(comment.get("botActor"))
        header = f"Comment on {identifier}" + (f" by {author}" if author else "")
        if answered:
            header += " (reply)"
        links = [ObjectLink(issue_id, "comment_on")] + ([ObjectLink(answered, "reply_to")] if answered else [])
        return SyncedObject(
            native_id=native_id,
            kind="comment",
            title=header,
            text=f"{header}: {issue.get('title') or ''}\n\n{comment.get('body') or ''}".rstrip(),
            url=comment.get("url"),
            author=author,
            created_at=epoch(comment.get("createdAt")),
            updated_at=epoch(comment.get("updatedAt")),
            thread_native_id=issue_id,
            parent_native_id=answered or issue_id,
            links=tuple(links),
            native_fields={
                "linear_comment_id": str(comment["id"]),
                "linear_issue_id": str(issue["id"]),
                "linear_identifier": identifier,
                "linear_author": author,
                "linear_parent_comment_id": str(parent["id"]) if answered and parent else None,
            },
        )
    except (KeyError, TypeError, ValueError) as exc:
        key = comment.get("id") if isinstance(comment, dict) else None
        return ObjectFailure(comment_native_id(str(key)) if key else None, f"unreadable Linear comment: {exc!r}")
