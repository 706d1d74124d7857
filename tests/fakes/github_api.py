"""A loopback fake of the GitHub REST API, for the real githubkit client (and benchmarks) to talk to.

Stdlib ``http.server`` in a daemon thread (no extra dependency, importable by benchmarks:
``from tests.fakes.github_api import FakeGitHub``). It serves the calls the GitHub connector makes, with
GitHub's semantics where they matter to an incremental sync:

- ``GET /user``, ``GET /user/repos``, ``GET /repos/{o}/{r}``, ``GET /repos/{o}/{r}/issues`` (issues and
  pull requests; ``state``, ``since`` = updated at or after, ``sort``, ``direction``),
  ``GET /repos/{o}/{r}/issues/{n}`` (410 once deleted), ``GET /repos/{o}/{r}/issues/comments`` and
  ``GET /repos/{o}/{r}/pulls/comments`` (``since``, ``sort``, ``direction``), single comments by id,
  ``POST /login/oauth/access_token`` (refresh grant with rotation: the old refresh and access tokens die).
- ``per_page`` (max 100) / ``page`` pagination with ``Link`` headers on the fake's own host:port.
- ``ETag`` on every 200; ``If-None-Match`` that matches -> 304, which costs no rate limit.
- ``x-ratelimit-*`` headers per token; an exhausted budget -> 403 with ``x-ratelimit-remaining: 0`` until the
  fake clock reaches the reset; injected secondary limits (429 + ``retry-after``), 5xx, stalls; 401 for a
  revoked, unknown or expired token; 403 "Resource not accessible" for a token denied a repo.
- Mutations (new, edited, deleted issues and comments) stamp the fake clock, which only moves when a test
  calls ``advance``: timestamps are deterministic. A new comment bumps its issue's ``updated_at``, as on GitHub.

Every request is recorded (method, path, query, headers of interest, status) so tests can assert what an
incremental sync asked for.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.fakes.loopback import LoopbackFake, RestHandler

START_EPOCH = 1767225600  # 2026-01-01T00:00:00Z
HTML_BASE = "https://github.com"
RECORDED_HEADERS = ("authorization", "if-none-match", "user-agent", "x-github-api-version", "accept")


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str) -> int:
    parsed = datetime.fromisoformat(value)
    return int((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp())


@dataclass
class FakeToken:
    login: str
    expires_at: float | None = None
    revoked: bool = False
    denied_repos: set[str] = field(default_factory=set)  # full names answered with 403 (missing scope)


@dataclass
class FakeIssue:
    number: int
    id: int
    title: str
    body: str
    author: str
    labels: list[str]
    state: str
    created_at: int
    updated_at: int
    is_pull_request: bool
    closed_at: int | None = None
    merged_at: int | None = None
    deleted: bool = False
    comments: int = 0


@dataclass
class FakeComment:
    id: int
    issue_number: int
    body: str
    author: str
    created_at: int
    updated_at: int


@dataclass
class FakeReviewComment:
    id: int
    pr_number: int
    body: str
    author: str
    path: str
    line: int
    in_reply_to_id: int | None
    created_at: int
    updated_at: int


@dataclass
class FakeRepo:
    owner: str
    name: str
    id: int
    private: bool
    default_branch: str
    members: set[str]
    description: str = ""
    issues: dict[int, FakeIssue] = field(default_factory=dict)
    comments: dict[int, FakeComment] = field(default_factory=dict)
    review_comments: dict[int, FakeReviewComment] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    status: int


@dataclass
class _Fault:
    status: int
    times: int
    path_contains: str | None
    headers: dict[str, str]
    body: dict[str, Any]
    stall_s: float = 0.0


@dataclass
class _RateBudget:
    limit: int = 5000
    remaining: int = 5000
    reset: int = 0


class FakeGitHub(LoopbackFake):
    """The fake API and its data, on 127.0.0.1 at a free port; ``base_url`` ends with '/'."""

    thread_name = "fake-github"

    def __init__(self, *, now: int = START_EPOCH) -> None:
        self.now = now
        self.lock = threading.RLock()
        self.users: dict[str, int] = {}
        self.tokens: dict[str, FakeToken] = {}
        self.repos: dict[str, FakeRepo] = {}
        self.oauth_apps: dict[str, str] = {}  # client_id -> client_secret
        self.refresh_tokens: dict[str, tuple[str, str]] = {}  # refresh token -> (login, client_id)
        self.requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        # Called with (method, path, query) before each request is answered: tests change data mid-listing.
        self.before_request: list[Callable[[str, str, dict[str, str]], None]] = []
        self._budgets: dict[str, _RateBudget] = {}
        self._next_id = 1000
        fake = self

        class Handler(_Handler):
            github = fake

        self._listen(Handler)

    # ---- server -----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}login/oauth/access_token"

    # ---- clock and ids ----------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the fake clock (usable as the provider's ``ctx.sleep``: waiting makes a reset arrive)."""
        with self.lock:
            self.now += max(1, round(seconds))

    def clock(self) -> float:
        return float(self.now)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # ---- identities -------------------------------------------------------------------------------

    def add_token(self, token: str, login: str, *, expires_at: float | None = None) -> str:
        with self.lock:
            self.users.setdefault(login, self._new_id())
            self.tokens[token] = FakeToken(login, expires_at)
        return token

    def revoke_token(self, token: str) -> None:
        with self.lock:
            self.tokens[token].revoked = True

    def deny_repo(self, token: str, full_name: str) -> None:
        """The token lacks the scope for this repo: its calls there answer 403 (not a rate limit)."""
        with self.lock:
            self.tokens[token].denied_repos.add(full_name)

    def add_oauth_app(self, client_id: str, client_secret: str) -> None:
        with self.lock:
            self.oauth_apps[client_id] = client_secret

    def issue_oauth_tokens(self, login: str, client_id: str, *, expires_in: int = 28800) -> tuple[str, str]:
        """A user-to-server token pair as GitHub Apps issue it (expiring access token, rotating refresh token)."""
        with self.lock:
            n = self._new_id()
            access, refresh = f"ghu_fake{n}", f"ghr_fake{n}"
            self.add_token(access, login, expires_at=self.now + expires_in)
            self.refresh_tokens[refresh] = (login, client_id)
        return access, refresh

    # ---- data -------------------------------------------------------------------------------------

    def add_repo(
        self,
        full_name: str,
        *,
        private: bool = False,
        default_branch: str = "main",
        members: Iterable[str] = (),
        description: str = "",
    ) -> FakeRepo:
        owner, name = full_name.split("/")
        with self.lock:
            repo = FakeRepo(owner, name, self._new_id(), private, default_branch, {owner, *members}, description)
            self.repos[full_name] = repo
        return repo

    def delete_repo(self, full_name: str) -> None:
        with self.lock:
            del self.repos[full_name]

    def add_issue(
        self,
        full_name: str,
        title: str,
        body: str = "",
        *,
        author: str = "octocat",
        labels: Iterable[str] = (),
        pull_request: bool = False,
        state: str = "open",
    ) -> int:
        with self.lock:
            repo = self.repos[full_name]
            number = max(repo.issues, default=0) + 1
            repo.issues[number] = FakeIssue(
                number, self._new_id(), title, body, author, list(labels), state, self.now, self.now, pull_request
            )
        return number

    def edit_issue(
        self,
        full_name: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
        labels: Iterable[str] | None = None,
    ) -> None:
        with self.lock:
            issue = self.repos[full_name].issues[number]
            if title is not None:
                issue.title = title
            if body is not None:
                issue.body = body
            if state is not None:
                issue.state = state
                issue.closed_at = self.now if state == "closed" else None
            if labels is not None:
                issue.labels = list(labels)
            issue.updated_at = self.now

    def merge_pull_request(self, full_name: str, number: int) -> None:
        with self.lock:
            pull = self.repos[full_name].issues[number]
            assert pull.is_pull_request
            pull.state, pull.closed_at, pull.merged_at, pull.updated_at = "closed", self.now, self.now, self.now

    def delete_issue(self, full_name: str, number: int) -> None:
        """GitHub deletes without a tombstone: gone from lists; the single GET answers 410."""
        with self.lock:
            repo = self.repos[full_name]
            repo.issues[number].deleted = True
            for cid in [c.id for c in repo.comments.values() if c.issue_number == number]:
                del repo.comments[cid]
            for rid in [c.id for c in repo.review_comments.values() if c.pr_number == number]:
                del repo.review_comments[rid]

    def add_comment(self, full_name: str, number: int, body: str, *, author: str = "octocat") -> int:
        with self.lock:
            repo = self.repos[full_name]
            cid = self._new_id()
            repo.comments[cid] = FakeComment(cid, number, body, author, self.now, self.now)
            issue = repo.issues[number]
            issue.comments += 1
            issue.updated_at = self.now
        return cid

    def edit_comment(self, full_name: str, comment_id: int, body: str) -> None:
        with self.lock:
            comment = self.repos[full_name].comments[comment_id]
            comment.body = body
            comment.updated_at = self.now

    def delete_comment(self, full_name: str, comment_id: int) -> None:
        with self.lock:
            repo = self.repos[full_name]
            comment = repo.comments.pop(comment_id)
            repo.issues[comment.issue_number].comments -= 1

    def add_review_comment(
        self,
        full_name: str,
        pr_number: int,
        body: str,
        *,
        author: str = "octocat",
        path: str = "src/app.py",
        line: int = 1,
        in_reply_to: int | None = None,
    ) -> int:
        with self.lock:
            repo = self.repos[full_name]
            assert repo.issues[pr_number].is_pull_request, "review comments live on pull requests"
            rid = self._new_id()
            repo.review_comments[rid] = FakeReviewComment(
                rid, pr_number, body, author, path, line, in_reply_to, self.now, self.now
            )
            repo.issues[pr_number].updated_at = self.now
        return rid

    def edit_review_comment(self, full_name: str, comment_id: int, body: str) -> None:
        with self.lock:
            comment = self.repos[full_name].review_comments[comment_id]
            comment.body = body
            comment.updated_at = self.now

    def delete_review_comment(self, full_name: str, comment_id: int) -> None:
        with self.lock:
            del self.repos[full_name].review_comments[comment_id]

    # ---- faults -----------------------------------------------------------------------------------

    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        path_contains: str | None = None,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        stall_s: float = 0.0,
    ) -> None:
        """The next `times` matching requests answer `status` (after `stall_s` seconds of wall time)."""
        with self.lock:
            self._faults.append(
                _Fault(status, times, path_contains, headers or {}, body or {"message": "Server Error"}, stall_s)
            )

    def stall_next(self, seconds: float, *, times: int = 1, path_contains: str | None = None) -> None:
        """The next matching requests hang for `seconds` of wall time, then answer 504 (a client timeout first)."""
        self.fail_next(504, times=times, path_contains=path_contains, stall_s=seconds)

    def secondary_rate_limit(self, retry_after: int | None, *, times: int = 1, status: int = 429) -> None:
        """GitHub's secondary limit: 429 or 403, with ``retry-after`` or (None) only its message."""
        self.fail_next(
            status,
            times=times,
            headers={} if retry_after is None else {"retry-after": str(retry_after)},
            body={
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
            },
        )

    def exhaust_rate_limit(self, token: str, *, reset_in: int) -> None:
        """The token's primary budget is spent until the fake clock reaches now + reset_in."""
        with self.lock:
            budget = self._budgets.setdefault(token, _RateBudget())
            budget.remaining = 0
            budget.reset = self.now + reset_in

    # ---- what was asked ---------------------------------------------------------------------------

    def calls(self, path_suffix: str | None = None, *, method: str = "GET") -> list[RecordedRequest]:
        with self.lock:
            return [
                r for r in self.requests if r.method == method and (path_suffix is None or r.path.endswith(path_suffix))
            ]

    def clear_requests(self) -> None:
        with self.lock:
            self.requests.clear()

    # ---- request handling (called by the handler thread) ------------------------------------------

    def _take_fault(self, path: str) -> _Fault | None:
        with self.lock:
            for fault in self._faults:
                if fault.path_contains is None or fault.path_contains in path:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _budget(self, token: str) -> _RateBudget:
        budget = self._budgets.setdefault(token, _RateBudget(reset=self.now + 3600))
        if budget.remaining == 0 and self.now >= budget.reset:
            budget.remaining, budget.reset = budget.limit, self.now + 3600
        return budget

    def _authenticate(self, authorization: str) -> tuple[str | None, FakeToken | None]:
        match = re.fullmatch(r"(?:token|Bearer|bearer) (\S+)", authorization.strip())
        if not match:
            return None, None
        token = self.tokens.get(match.group(1))
        if token is None or token.revoked or (token.expires_at is not None and self.now >= token.expires_at):
            return match.group(1), None
        return match.group(1), token


class _Handler(RestHandler):
    github: FakeGitHub
    # Headers and body go out in two writes: without TCP_NODELAY a kept-alive connection (httpx, githubkit)
    # waits ~40 ms per answer for the client's delayed ACK (Nagle), which would dominate every timing.
    disable_nagle_algorithm = True

    # ---- plumbing ---------------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        length = int(self.headers.get("content-length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        fake = self.github
        for hook in list(fake.before_request):
            hook(method, parts.path, query)
        status, headers, payload = self._route(method, parts.path, query, raw_body)
        with fake.lock:
            fake.requests.append(
                RecordedRequest(
                    method,
                    parts.path,
                    query,
                    {h: self.headers[h] for h in RECORDED_HEADERS if self.headers.get(h) is not None},
                    status,
                )
            )
        self._send(status, headers, payload)

    def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
        body = b"" if status == 304 or payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if status != 304:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _route(self, method: str, path: str, query: dict[str, str], raw_body: bytes) -> tuple[int, dict[str, str], Any]:
        fake = self.github
        fault = fake._take_fault(path)
        if fault is not None:
            if fault.stall_s:
                time.sleep(fault.stall_s)
            return fault.status, fault.headers, fault.body
        if method == "POST" and path == "/login/oauth/access_token":
            return self._oauth_token(raw_body)
        token_value, token = fake._authenticate(self.headers.get("authorization") or "")
        if token is None or token_value is None:
            return (
                401,
                {},
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"},
            )
        with fake.lock:
            budget = fake._budget(token_value)
            rate_headers = {
                "x-ratelimit-limit": str(budget.limit),
                "x-ratelimit-remaining": str(budget.remaining),
                "x-ratelimit-reset": str(budget.reset),
                "x-ratelimit-used": str(budget.limit - budget.remaining),
                "x-ratelimit-resource": "core",
            }
            if budget.remaining == 0:
                return (
                    403,
                    rate_headers,
                    {
                        "message": f"API rate limit exceeded for user ID {fake.users[token.login]}.",
                        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                    },
                )
            status, headers, payload = self._api(method, path, query, token)
            if status == 200:
                etag = 'W/"' + hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest() + '"'
                headers["ETag"] = etag
                if self.headers.get("if-none-match") == etag:
                    return 304, {**rate_headers, **headers}, None  # an authorized 304 costs no rate limit
            budget.remaining -= 1
            rate_headers["x-ratelimit-remaining"] = str(budget.remaining)
            rate_headers["x-ratelimit-used"] = str(budget.limit - budget.remaining)
            return status, {**rate_headers, **headers}, payload

    # ---- the API ----------------------------------------------------------------------------------

    def _api(self, method: str, path: str, query: dict[str, str], token: FakeToken) -> tuple[int, dict[str, str], Any]:
        fake = self.github
        if method != "GET":
            return 404, {}, {"message": "Not Found"}
        if path == "/user":
            return 200, {}, self._user(token.login)
        if path == "/user/repos":
            repos = sorted(
                (r for r in fake.repos.values() if token.login in r.members), key=lambda r: r.full_name.lower()
            )
            return self._page(path, query, repos, self._repo, default_per_page=30)
        match = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path)
        if not match:
            return 404, {}, {"message": "Not Found"}
        full_name, rest = f"{match.group(1)}/{match.group(2)}", match.group(3) or ""
        repo = fake.repos.get(full_name)
        if repo is None or token.login not in repo.members:
            return 404, {}, {"message": "Not Found"}
        if full_name in token.denied_repos:
            return 403, {}, {"message": "Resource not accessible by personal access token"}
        if rest == "":
            return 200, {}, self._repo(repo)
        if rest == "/issues":
            return self._list_issues(path, query, repo)
        if rest == "/issues/comments":
            return self._list_comments(path, query, list(repo.comments.values()), lambda c: self._comment(repo, c))
        if rest == "/pulls/comments":
            comments = list(repo.review_comments.values())
            return self._list_comments(path, query, comments, lambda c: self._review_comment(repo, c))
        comment_match = re.fullmatch(r"/(issues|pulls)/comments/(\d+)", rest)
        if comment_match:
            cid = int(comment_match.group(2))
            if comment_match.group(1) == "issues" and cid in repo.comments:
                return 200, {}, self._comment(repo, repo.comments[cid])
            if comment_match.group(1) == "pulls" and cid in repo.review_comments:
                return 200, {}, self._review_comment(repo, repo.review_comments[cid])
            return 404, {}, {"message": "Not Found"}
        issue_match = re.fullmatch(r"/issues/(\d+)", rest)
        if issue_match:
            issue = repo.issues.get(int(issue_match.group(1)))
            if issue is None:
                return 404, {}, {"message": "Not Found"}
            if issue.deleted:
                return 410, {}, {"message": "This issue was deleted"}
            return 200, {}, self._issue(repo, issue)
        return 404, {}, {"message": "Not Found"}

    def _list_issues(self, path: str, query: dict[str, str], repo: FakeRepo) -> tuple[int, dict[str, str], Any]:
        state = query.get("state", "open")
        if state not in ("open", "closed", "all"):
            return 422, {}, {"message": "Validation Failed"}
        issues = [i for i in repo.issues.values() if not i.deleted and (state == "all" or i.state == state)]
        try:
            since = parse_iso(query["since"]) if "since" in query else None
        except ValueError:
            return 422, {}, {"message": "Validation Failed", "errors": [{"field": "since", "code": "invalid"}]}
        if since is not None:
            issues = [i for i in issues if i.updated_at >= since]
        sort = query.get("sort", "created")
        key = {"created": "created_at", "updated": "updated_at", "comments": "comments"}.get(sort)
        if key is None:
            return 422, {}, {"message": "Validation Failed"}
        issues.sort(key=lambda i: (getattr(i, key), i.number), reverse=query.get("direction", "desc") == "desc")
        return self._page(path, query, issues, lambda i: self._issue(repo, i))

    def _list_comments(
        self, path: str, query: dict[str, str], items: list[Any], render: Callable[[Any], dict[str, Any]]
    ) -> tuple[int, dict[str, str], Any]:
        """Issue or review comments (both have id, created_at, updated_at)."""
        try:
            since = parse_iso(query["since"]) if "since" in query else None
        except ValueError:
            return 422, {}, {"message": "Validation Failed", "errors": [{"field": "since", "code": "invalid"}]}
        if since is not None:
            items = [c for c in items if c.updated_at >= since]
        if "sort" in query:  # without sort: ascending id; with it, direction defaults to desc
            field_name = {"created": "created_at", "updated": "updated_at"}.get(query["sort"])
            if field_name is None:
                return 422, {}, {"message": "Validation Failed"}
            items.sort(key=lambda c: (getattr(c, field_name), c.id), reverse=query.get("direction", "desc") == "desc")
        else:
            items.sort(key=lambda c: c.id)
        return self._page(path, query, items, render)

    def _page(
        self,
        path: str,
        query: dict[str, str],
        items: list[Any],
        render: Callable[[Any], dict[str, Any]],
        *,
        default_per_page: int = 30,
    ) -> tuple[int, dict[str, str], Any]:
        """One page of `items` (already filtered and sorted), rendered to JSON, with GitHub's Link header."""
        try:
            per_page = min(100, max(1, int(query.get("per_page", default_per_page))))
            page = max(1, int(query.get("page", 1)))
        except ValueError:
            return 422, {}, {"message": "Validation Failed"}
        last = max(1, -(-len(items) // per_page))
        chunk = [render(item) for item in items[(page - 1) * per_page : page * per_page]]
        host = self.headers.get("host") or f"127.0.0.1:{self.github.port}"

        def url(p: int) -> str:
            return f"http://{host}{path}?" + urlencode({**query, "per_page": per_page, "page": p})

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        return 200, ({"Link": ", ".join(links)} if links else {}), chunk

    def _oauth_token(self, raw_body: bytes) -> tuple[int, dict[str, str], Any]:
        fake = self.github
        text = raw_body.decode() or "{}"
        try:
            form: dict[str, Any] = json.loads(text)
        except ValueError:
            form = {k: v[0] for k, v in parse_qs(text).items()}
        with fake.lock:
            client_id = str(form.get("client_id"))
            if fake.oauth_apps.get(client_id) != form.get("client_secret"):
                return (
                    200,
                    {},
                    {
                        "error": "incorrect_client_credentials",
                        "error_description": "The client_id and/or client_secret passed are incorrect.",
                    },
                )
            if form.get("grant_type") != "refresh_token":
                return 200, {}, {"error": "unsupported_grant_type", "error_description": "Only refresh_token is faked."}
            held = fake.refresh_tokens.pop(str(form.get("refresh_token")), None)
            if held is None or held[1] != client_id:
                return (
                    200,
                    {},
                    {
                        "error": "bad_refresh_token",
                        "error_description": "The refresh token passed is incorrect or expired.",
                        "error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors",
                    },
                )
            login = held[0]
            # Rotation: the used refresh token is gone (popped above) and the user's older access tokens die.
            for token in fake.tokens.values():
                if token.login == login and token.expires_at is not None:
                    token.revoked = True
        access, refresh = fake.issue_oauth_tokens(login, client_id)
        return (
            200,
            {},
            {
                "access_token": access,
                "expires_in": 28800,
                "refresh_token": refresh,
                "refresh_token_expires_in": 15897600,
                "scope": "",
                "token_type": "bearer",
            },
        )

    # ---- JSON shapes (the fields GitHub returns that a client reads; not every field) -------------

    def _api_url(self, path: str) -> str:
        return f"http://{self.headers.get('host') or '127.0.0.1'}{path}"

    def _user(self, login: str) -> dict[str, Any]:
        uid = self.github.users.setdefault(login, self.github._new_id())
        return {
            "login": login,
            "id": uid,
            "node_id": f"U_{uid}",
            "type": "User",
            "site_admin": False,
            "name": login.title(),
            "html_url": f"{HTML_BASE}/{login}",
            "url": self._api_url(f"/users/{login}"),
        }

    def _repo(self, repo: FakeRepo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "visibility": "private" if repo.private else "public",
            "owner": self._user(repo.owner),
            "html_url": f"{HTML_BASE}/{repo.full_name}",
            "description": repo.description or None,
            "fork": False,
            "url": self._api_url(f"/repos/{repo.full_name}"),
            "default_branch": repo.default_branch,
            "archived": False,
            "has_issues": True,
            "open_issues_count": sum(1 for i in repo.issues.values() if i.state == "open" and not i.deleted),
            "created_at": iso(START_EPOCH),
            "updated_at": iso(self.github.now),
            "pushed_at": iso(self.github.now),
        }

    def _issue(self, repo: FakeRepo, issue: FakeIssue) -> dict[str, Any]:
        api = f"/repos/{repo.full_name}/issues/{issue.number}"
        data: dict[str, Any] = {
            "id": issue.id,
            "node_id": f"I_{issue.id}",
            "number": issue.number,
            "title": issue.title,
            "body": issue.body or None,
            "user": self._user(issue.author),
            "labels": [{"id": zlib.crc32(n.encode()), "name": n, "color": "ededed"} for n in issue.labels],
            "state": issue.state,
            "state_reason": "completed" if issue.state == "closed" else None,
            "locked": False,
            "comments": issue.comments,
            "author_association": "OWNER" if issue.author == repo.owner else "CONTRIBUTOR",
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": iso(issue.closed_at) if issue.closed_at else None,
            "url": self._api_url(api),
            "repository_url": self._api_url(f"/repos/{repo.full_name}"),
            "comments_url": self._api_url(f"{api}/comments"),
            "html_url": f"{HTML_BASE}/{repo.full_name}/{'pull' if issue.is_pull_request else 'issues'}/{issue.number}",
        }
        if issue.is_pull_request:
            pulls = f"/repos/{repo.full_name}/pulls/{issue.number}"
            data["pull_request"] = {
                "url": self._api_url(pulls),
                "html_url": data["html_url"],
                "diff_url": data["html_url"] + ".diff",
                "patch_url": data["html_url"] + ".patch",
                "merged_at": iso(issue.merged_at) if issue.merged_at else None,
            }
        return data

    def _comment(self, repo: FakeRepo, comment: FakeComment) -> dict[str, Any]:
        issue = repo.issues[comment.issue_number]
        kind = "pull" if issue.is_pull_request else "issues"
        return {
            "id": comment.id,
            "node_id": f"IC_{comment.id}",
            "url": self._api_url(f"/repos/{repo.full_name}/issues/comments/{comment.id}"),
            "html_url": f"{HTML_BASE}/{repo.full_name}/{kind}/{comment.issue_number}#issuecomment-{comment.id}",
            "issue_url": self._api_url(f"/repos/{repo.full_name}/issues/{comment.issue_number}"),
            "body": comment.body,
            "user": self._user(comment.author),
            "author_association": "CONTRIBUTOR",
            "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
        }

    def _review_comment(self, repo: FakeRepo, comment: FakeReviewComment) -> dict[str, Any]:
        data = {
            "id": comment.id,
            "node_id": f"PRRC_{comment.id}",
            "url": self._api_url(f"/repos/{repo.full_name}/pulls/comments/{comment.id}"),
            "html_url": f"{HTML_BASE}/{repo.full_name}/pull/{comment.pr_number}#discussion_r{comment.id}",
            "pull_request_url": self._api_url(f"/repos/{repo.full_name}/pulls/{comment.pr_number}"),
            "pull_request_review_id": comment.id + 1,
            "diff_hunk": f"@@ -1,3 +1,3 @@\n line {comment.line}",
            "path": comment.path,
            "position": comment.line,
            "original_position": comment.line,
            "commit_id": "0" * 40,
            "original_commit_id": "0" * 40,
            "line": comment.line,
            "side": "RIGHT",
            "user": self._user(comment.author),
            "body": comment.body,
            "author_association": "CONTRIBUTOR",
            "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
        }
        if comment.in_reply_to_id is not None:
            data["in_reply_to_id"] = comment.in_reply_to_id
        return data
