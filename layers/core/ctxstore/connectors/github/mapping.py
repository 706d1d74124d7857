"""GitHub JSON -> synced objects: issues, pull requests, issue comments, review comments, cross-references.

Native ids (unique within one provider account; the repo part is lower-cased because GitHub names are
case-insensitive and a reference written ``Acme/Widgets#3`` must land on the same id as the issue itself):
- issue or pull request: ``{owner}/{repo}#{number}`` (PRs share the issue number space)
- issue comment (also a PR's conversation comment): ``{owner}/{repo}#issuecomment-{id}`` (GitHub's own anchor)
- PR review comment: ``{owner}/{repo}#discussion_r{id}`` (GitHub's own anchor)

Graph: every comment has ``thread`` = its issue/PR and a ``comment_on`` link to it; its ``parent`` is the
issue/PR, or for a review reply the review comment it answers (plus a ``reply_to`` link). Cross-references
in bodies (``#123``, ``GH-123``, ``owner/repo#123``, issue/PR URLs on github.com or the repo's own web host)
become ``references`` links; mentions inside code blocks or inline code are ignored, as GitHub does.
A pull request's closing keywords (``fixes #12``, ``closes``, ``resolves`` and their forms) are ``references``
links as well, so the relation stays in the shared vocabulary; the closed issues are also listed in
``native_fields["github_closes"]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ctxstore.ports.connector_provider import ObjectFailure, ObjectLink, SyncedObject

_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`", re.S)
_URL_REF = re.compile(r"https?://(?P<host>[^/\s]+)/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)/(?:issues|pull)/(?P<num>\d+)")
_QUALIFIED_REF = re.compile(r"(?<![\w/.#-])(?P<owner>[A-Za-z0-9][\w.-]*)/(?P<repo>[\w.-]+)#(?P<num>\d+)\b")
_SHORT_REF = re.compile(r"(?<![\w/#&.-])(?:#|GH-)(?P<num>\d+)\b")
_CLOSING_KEYWORD = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+$", re.I)
_ISSUE_URL_NUMBER = re.compile(r"/(?:issues|pulls)/(\d+)$")


def issue_native_id(full_name: str, number: int) -> str:
    return f"{full_name.lower()}#{number}"


def issue_comment_native_id(full_name: str, comment_id: int) -> str:
    return f"{full_name.lower()}#issuecomment-{comment_id}"


def review_comment_native_id(full_name: str, comment_id: int) -> str:
    return f"{full_name.lower()}#discussion_r{comment_id}"


def epoch(value: str | None) -> float | None:
    """GitHub's ISO 8601 timestamps (``2026-01-01T00:00:00Z``) as epoch seconds."""
    return datetime.fromisoformat(value).timestamp() if value else None


def find_references(text: str, full_name: str, web_hosts: Iterable[str]) -> list[tuple[str, bool]]:
    """Native ids of the issues/PRs a body refers to, in order, each with whether a closing keyword precedes it."""
    hosts = {h.lower() for h in web_hosts}
    prose = _CODE.sub(" ", text)
    found: dict[str, bool] = {}
    spans: list[tuple[int, int]] = []

    def add(native_id: str, start: int) -> None:
        closing = bool(_CLOSING_KEYWORD.search(prose[max(0, start - 20) : start]))
        found[native_id] = found.get(native_id, False) or closing

    for match in _URL_REF.finditer(prose):
        spans.append(match.span())
        if match.group("host").lower() in hosts:
            add(
                issue_native_id(f"{match.group('owner')}/{match.group('repo')}", int(match.group("num"))), match.start()
            )
    for match in _QUALIFIED_REF.finditer(prose):
        if not _inside(match.start(), spans):
            spans.append(match.span())
            add(
                issue_native_id(f"{match.group('owner')}/{match.group('repo')}", int(match.group("num"))), match.start()
            )
    for match in _SHORT_REF.finditer(prose):
        if not _inside(match.start(), spans):
            add(issue_native_id(full_name, int(match.group("num"))), match.start())
    return list(found.items())


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


def _reference_links(
    text: str, full_name: str, web_hosts: Iterable[str], exclude: set[str]
) -> tuple[list[ObjectLink], list[str]]:
    links: list[ObjectLink] = []
    closes: list[str] = []
    for native_id, closing in find_references(text, full_name, web_hosts):
        if native_id in exclude:
            continue
        links.append(ObjectLink(native_id, "references"))
        if closing:
            closes.append(native_id)
    return links, closes


def web_hosts_of(item: dict[str, Any]) -> tuple[str, ...]:
    """github.com plus the web host of the object itself (a GitHub Enterprise Server instance)."""
    host = urlsplit(str(item.get("html_url") or "")).netloc
    return ("github.com", host) if host else ("github.com",)


def _login(item: dict[str, Any]) -> str | None:
    user = item.get("user")
    return str(user["login"]) if isinstance(user, dict) and user.get("login") else None


def map_issue(full_name: str, item: dict[str, Any]) -> SyncedObject | ObjectFailure:
    """An issue or pull request (an item of ``/issues`` with a ``pull_request`` key is a PR)."""
    try:
        number = int(item["number"])
        native_id = issue_native_id(full_name, number)
        is_pr = isinstance(item.get("pull_request"), dict)
        title = str(item.get("title") or "")
        body = str(item.get("body") or "")
        labels = [str(label["name"]) for label in item.get("labels") or [] if isinstance(label, dict)]
        state = str(item.get("state") or "")
        author = _login(item)
        links, closes = _reference_links(f"{title}\n{body}", full_name, web_hosts_of(item), {native_id})
        merged = is_pr and bool(item["pull_request"].get("merged_at"))
        header = f"{'Pull request' if is_pr else 'Issue'} {full_name}#{number} · {state}" + (
            " (merged)" if merged else ""
        )
        if labels:
            header += " · labels: " + ", ".join(labels)
        if author:
            header += f" · by @{author}"
        fields: dict[str, Any] = {
            "github_repo": full_name,
            "github_issue_number": number,
            "github_id": item.get("id"),
            "github_state": state,
            "github_labels": labels,
            "github_is_pull_request": is_pr,
            "github_author": author,
        }
        if is_pr:
            fields["github_merged"] = merged
            if closes:
                fields["github_closes"] = closes
        return SyncedObject(
            native_id=native_id,
            kind="pull_request" if is_pr else "issue",
            title=title,
            text=f"{title}\n\n{header}\n\n{body}".rstrip(),
            url=item.get("html_url"),
            author=author,
            created_at=epoch(item.get("created_at")),
            updated_at=epoch(item.get("updated_at")),
            thread_native_id=native_id,
            links=tuple(links),
            native_fields=fields,
        )
    except (KeyError, TypeError, ValueError) as exc:
        return ObjectFailure(_safe_issue_id(full_name, item), f"unreadable GitHub issue: {type(exc).__name__}: {exc}")


def map_issue_comment(full_name: str, item: dict[str, Any]) -> SyncedObject | ObjectFailure:
    try:
        number = _number_from_url(str(item["issue_url"]))
        return _comment(full_name, item, issue_comment_native_id, number, f"Comment on {full_name}#{number}", None)
    except (KeyError, TypeError, ValueError) as exc:
        failed_id = _safe_comment_id(full_name, item, issue_comment_native_id)
        return ObjectFailure(failed_id, f"unreadable GitHub comment: {exc!r}")


def map_review_comment(full_name: str, item: dict[str, Any]) -> SyncedObject | ObjectFailure:
    try:
        number = _number_from_url(str(item["pull_request_url"]))
        reply_to = item.get("in_reply_to_id")
        answered = review_comment_native_id(full_name, int(reply_to)) if reply_to else None
        place = f"{item.get('path')}:{item.get('line') or item.get('original_line') or '?'}"
        return _comment(
            full_name,
            item,
            review_comment_native_id,
            number,
            f"Review comment on {full_name}#{number} at {place}",
            answered,
            {"github_path": item.get("path"), "github_line": item.get("line"), "github_in_reply_to_id": reply_to},
        )
    except (KeyError, TypeError, ValueError) as exc:
        failed_id = _safe_comment_id(full_name, item, review_comment_native_id)
        return ObjectFailure(failed_id, f"unreadable GitHub review comment: {exc!r}")


def _comment(
    full_name: str,
    item: dict[str, Any],
    make_id: Callable[[str, int], str],
    number: int,
    header: str,
    answered: str | None,
    extra_fields: dict[str, Any] | None = None,
) -> SyncedObject:
    """A comment on issue/PR `number`: thread = the issue/PR; parent = the comment it answers, else the issue/PR."""
    comment_id = int(item["id"])
    native_id = make_id(full_name, comment_id)
    issue = issue_native_id(full_name, number)
    author = _login(item)
    if author:
        header += f" by @{author}"
    body = str(item.get("body") or "")
    links, _ = _reference_links(body, full_name, web_hosts_of(item), {native_id, issue})
    own_links = [ObjectLink(issue, "comment_on")] + ([ObjectLink(answered, "reply_to")] if answered else [])
    return SyncedObject(
        native_id=native_id,
        kind="comment",
        title=header,
        text=f"{header}\n\n{body}".rstrip(),
        url=item.get("html_url"),
        author=author,
        created_at=epoch(item.get("created_at")),
        updated_at=epoch(item.get("updated_at")),
        thread_native_id=issue,
        parent_native_id=answered or issue,
        links=(*own_links, *links),
        native_fields={
            "github_repo": full_name,
            "github_issue_number": number,
            "github_comment_id": comment_id,
            "github_author": author,
            **(extra_fields or {}),
        },
    )


def _number_from_url(url: str) -> int:
    match = _ISSUE_URL_NUMBER.search(url)
    if not match:
        raise ValueError(f"no issue number in {url!r}")
    return int(match.group(1))


def _safe_issue_id(full_name: str, item: Any) -> str | None:
    number = item.get("number") if isinstance(item, dict) else None
    return issue_native_id(full_name, number) if isinstance(number, int) else None


def _safe_comment_id(full_name: str, item: Any, make: Callable[[str, int], str]) -> str | None:
    cid = item.get("id") if isinstance(item, dict) else None
    return make(full_name, cid) if isinstance(cid, int) else None
