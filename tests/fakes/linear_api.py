"""A loopback fake of Linear's GraphQL API and OAuth token endpoint, for the Linear connector (and benchmarks).

Stdlib ``http.server`` in a daemon thread; queries run through **graphql-core** against a subset of
Linear's published schema (``packages/sdk/src/schema.graphql``: the same type, field, argument and input
names, e.g. ``IssueFilter.updatedAt: DateComparator`` of ``DateTimeOrDuration``, ``IssueIDComparator``,
``PaginationOrderBy``), so a query Linear would refuse as invalid is refused here too (HTTP 400,
``GRAPHQL_VALIDATION_FAILED``). It serves what the connector asks for, with Linear's semantics where they
matter to an incremental sync:

- ``POST /graphql``: ``viewer``, ``organization``, ``teams``, ``team(id)``, ``issues``, ``issue(id)``,
  ``comments``; connections with ``first`` (at most 250), ``after`` (opaque ``endCursor``), ``orderBy``
  (``createdAt`` | ``updatedAt``, newest first), ``includeArchived`` (archived and trashed objects are left out
  unless it is true) and the filters the connector uses (``id``, ``team``, ``issue``, ``createdAt``,
  ``updatedAt`` with ``eq/neq/in/nin/gt/gte/lt/lte``, ``and``/``or``).
- Auth as Linear has it: a personal API key bare in ``Authorization``, an OAuth access token as ``Bearer``;
  anything else, a revoked key or an expired token -> HTTP 400 with ``extensions.code: AUTHENTICATION_ERROR``
  (``auth_error_status`` switches the status). A private team is visible to its members only; another
  team id is "Entity not found".
- ``POST /oauth/token`` (``grant_type=refresh_token``, client credentials in the form or Basic): rotates the
  refresh token (the old one dies) and answers ``{access_token, token_type, expires_in, scope,
  refresh_token}``; a dead refresh token -> 400 ``invalid_grant``, wrong client -> 401 ``invalid_client``.
- Rate limits as Linear documents them: HTTP 400 with ``extensions.code: RATELIMITED`` and
  ``X-RateLimit-Requests-Remaining: 0`` / ``X-RateLimit-Requests-Reset`` (epoch milliseconds); every answer
  carries the ``X-RateLimit-Requests-*`` headers. Injected 5xx, stalls and a per-answer delay.
- Mutations stamp ``updatedAt`` (strictly increasing, millisecond precision, wall clock): an edit, a new
  comment on an issue, archiving, trashing, restoring. A relation change stamps both issues.

Every request is recorded (kind, operation, variables, Authorization header, form, status) so tests can
assert what a sync asked for.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from graphql import GraphQLError, GraphQLObjectType, GraphQLResolveInfo, build_schema, graphql_sync

from tests.fakes.loopback import JsonHandler, LoopbackFake

MAX_FIRST = 250

SCHEMA_SDL = """
scalar DateTime
scalar DateTimeOrDuration
scalar TimelessDate

enum PaginationOrderBy { createdAt updatedAt }

type PageInfo { hasPreviousPage: Boolean! hasNextPage: Boolean! startCursor: String endCursor: String }

input DateComparator {
  eq: DateTimeOrDuration gt: DateTimeOrDuration gte: DateTimeOrDuration in: [DateTimeOrDuration!]
  lt: DateTimeOrDuration lte: DateTimeOrDuration neq: DateTimeOrDuration nin: [DateTimeOrDuration!]
}
input IDComparator { eq: ID in: [ID!] neq: ID nin: [ID!] }
input IssueIDComparator { eq: ID in: [ID!] neq: ID nin: [ID!] }
input StringComparator { eq: String in: [String!] neq: String nin: [String!] }
input BooleanComparator { eq: Boolean neq: Boolean }
input TeamFilter {
  and: [TeamFilter!] createdAt: DateComparator id: IDComparator key: StringComparator name: StringComparator
  or: [TeamFilter!] private: BooleanComparator updatedAt: DateComparator
}
input IssueFilter {
  and: [IssueFilter!] createdAt: DateComparator id: IssueIDComparator or: [IssueFilter!]
  parent: NullableIssueFilter team: TeamFilter updatedAt: DateComparator
}
input NullableIssueFilter {
  and: [NullableIssueFilter!] createdAt: DateComparator id: IssueIDComparator null: Boolean
  or: [NullableIssueFilter!] team: TeamFilter updatedAt: DateComparator
}
input NullableCommentFilter { id: IDComparator null: Boolean }
input CommentFilter {
  and: [CommentFilter!] createdAt: DateComparator id: IDComparator issue: NullableIssueFilter
  or: [CommentFilter!] parent: NullableCommentFilter updatedAt: DateComparator
}

type Organization { createdAt: DateTime! id: ID! name: String! urlKey: String! }
type User { active: Boolean! displayName: String! email: String! id: ID! name: String! }
type ActorBot { avatarUrl: String id: ID name: String subType: String type: String! userDisplayName: String }
type WorkflowState { color: String! id: ID! name: String! type: String! }

type Team {
  archivedAt: DateTime createdAt: DateTime! description: String displayName: String! id: ID!
  issueCount(includeArchived: Boolean = false): Int! key: String! name: String! private: Boolean!
  updatedAt: DateTime!
}
type TeamEdge { cursor: String! node: Team! }
type TeamConnection { edges: [TeamEdge!]! nodes: [Team!]! pageInfo: PageInfo! }

type IssueLabel { color: String! id: ID! name: String! }
type IssueLabelEdge { cursor: String! node: IssueLabel! }
type IssueLabelConnection { edges: [IssueLabelEdge!]! nodes: [IssueLabel!]! pageInfo: PageInfo! }

type IssueRelation {
  archivedAt: DateTime createdAt: DateTime! id: ID! issue: Issue! relatedIssue: Issue! type: String!
  updatedAt: DateTime!
}
type IssueRelationEdge { cursor: String! node: IssueRelation! }
type IssueRelationConnection { edges: [IssueRelationEdge!]! nodes: [IssueRelation!]! pageInfo: PageInfo! }

type Issue {
  archivedAt: DateTime assignee: User canceledAt: DateTime
  children(after: String, before: String, filter: IssueFilter, first: Int, includeArchived: Boolean, last: Int,
           orderBy: PaginationOrderBy): IssueConnection!
  comments(after: String, before: String, filter: CommentFilter, first: Int, includeArchived: Boolean, last: Int,
           orderBy: PaginationOrderBy): CommentConnection!
  completedAt: DateTime createdAt: DateTime! creator: User description: String dueDate: TimelessDate
  estimate: Float id: ID! identifier: String!
  inverseRelations(after: String, before: String, first: Int, includeArchived: Boolean, last: Int,
                   orderBy: PaginationOrderBy): IssueRelationConnection!
  labels(after: String, before: String, first: Int, includeArchived: Boolean, last: Int,
         orderBy: PaginationOrderBy): IssueLabelConnection!
  number: Float! parent: Issue previousIdentifiers: [String!]! priority: Float! priorityLabel: String!
  relations(after: String, before: String, first: Int, includeArchived: Boolean, last: Int,
            orderBy: PaginationOrderBy): IssueRelationConnection!
  state: WorkflowState! team: Team! title: String! trashed: Boolean updatedAt: DateTime! url: String!
}
type IssueEdge { cursor: String! node: Issue! }
type IssueConnection { edges: [IssueEdge!]! nodes: [Issue!]! pageInfo: PageInfo! }

type Comment {
  archivedAt: DateTime body: String! botActor: ActorBot
  children(after: String, before: String, filter: CommentFilter, first: Int, includeArchived: Boolean, last: Int,
           orderBy: PaginationOrderBy): CommentConnection!
  createdAt: DateTime! editedAt: DateTime id: ID! issue: Issue issueId: String parent: Comment parentId: String
  resolvedAt: DateTime updatedAt: DateTime! url: String! user: User
}
type CommentEdge { cursor: String! node: Comment! }
type CommentConnection { edges: [CommentEdge!]! nodes: [Comment!]! pageInfo: PageInfo! }

type Query {
  comment(hash: String, id: String): Comment!
  comments(after: String, before: String, filter: CommentFilter, first: Int, includeArchived: Boolean, last: Int,
           orderBy: PaginationOrderBy): CommentConnection!
  issue(id: String!): Issue!
  issues(after: String, before: String, filter: IssueFilter, first: Int, includeArchived: Boolean, last: Int,
         orderBy: PaginationOrderBy): IssueConnection!
  organization: Organization!
  team(id: String!): Team!
  teams(after: String, before: String, filter: TeamFilter, first: Int, includeArchived: Boolean, last: Int,
        orderBy: PaginationOrderBy): TeamConnection!
  viewer: User!
}
"""

PRIORITY_LABELS = {0: "No priority", 1: "Urgent", 2: "High", 3: "Medium", 4: "Low"}
STATES = {
    "Triage": "triage",
    "Backlog": "backlog",
    "Todo": "unstarted",
    "In Progress": "started",
    "Done": "completed",
    "Canceled": "canceled",
}


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_ms(value: object) -> int:
    """A DateTimeOrDuration argument as epoch ms (ISO 8601 date-times; durations are not modelled)."""
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        code = {"code": "INVALID_INPUT"}
        raise GraphQLError(f"fake: unsupported DateTimeOrDuration {value!r}", extensions=code) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)


# ---- data ----------------------------------------------------------------------------------------------


@dataclass
class FakeUser:
    id: str
    name: str
    email: str
    teams: set[str] = field(default_factory=set)  # memberships (private teams are visible to members only)


@dataclass
class FakeToken:
    user_id: str
    kind: str  # "key" (personal API key: bare header) | "oauth" (Bearer)
    expires_at: float | None = None  # wall-clock epoch s
    revoked: bool = False


@dataclass
class FakeTeam:
    id: str
    key: str
    name: str
    description: str
    private: bool
    created_at: int
    updated_at: int
    archived_at: int | None = None
    next_number: int = 1


@dataclass
class FakeIssue:
    id: str
    team_id: str
    number: int
    title: str
    description: str
    state: str
    priority: int
    creator_id: str | None
    assignee_id: str | None
    labels: list[str]
    parent_id: str | None
    created_at: int
    updated_at: int
    archived_at: int | None = None
    trashed: bool = False
    previous_identifiers: list[str] = field(default_factory=list)


@dataclass
class FakeRelation:
    id: str
    issue_id: str
    related_id: str
    type: str
    created_at: int
    updated_at: int
    archived_at: int | None = None


@dataclass
class FakeComment:
    id: str
    issue_id: str
    parent_id: str | None
    body: str
    user_id: str | None
    bot_name: str | None
    created_at: int
    updated_at: int
    edited_at: int | None = None
    archived_at: int | None = None


@dataclass(frozen=True)
class Call:
    kind: str  # "graphql" | "token"
    operation: str  # GraphQL operationName, or the token grant_type
    variables: dict[str, Any]
    authorization: str
    form: dict[str, str]
    status: int
    at: float


@dataclass
class _Fault:
    status: int
    times: int
    operation: str | None
    stall_s: float
    rate_limited: bool
    reset_in_s: float
    headers: dict[str, str]


# ---- the fake -------------------------------------------------------------------------------------------


class FakeLinear(LoopbackFake):
    """The fake API and its data, on 127.0.0.1 at a free port; ``base_url`` is the GraphQL endpoint
    (``CTXSTORE_CONNECTOR_BASE_URL_LINEAR``), ``token_url`` the OAuth endpoint (``..._TOKEN_URL_...``)."""

    thread_name = "fake-linear"

    def __init__(self, *, org_name: str = "Acme Corp", url_key: str = "acme") -> None:
        self.lock = threading.RLock()
        self.org = {"id": str(uuid.uuid4()), "name": org_name, "urlKey": url_key, "createdAt": iso(_now_ms())}
        self.users: dict[str, FakeUser] = {}
        self.tokens: dict[str, FakeToken] = {}
        self.clients: dict[str, str] = {}  # OAuth client id -> secret
        self.refresh_tokens: dict[str, tuple[str, str]] = {}  # refresh token -> (client id, user id)
        self.teams: dict[str, FakeTeam] = {}
        self.issues: dict[str, FakeIssue] = {}
        self.relations: dict[str, FakeRelation] = {}
        self.comments: dict[str, FakeComment] = {}
        self.labels: dict[str, str] = {}  # name -> id
        self.calls: list[Call] = []
        self.access_token_lifetime_s = 86399  # Linear: 24 h
        self.auth_error_status = 400
        self.page_cap = MAX_FIRST  # lower it to force small pages (the answer holds fewer than `first`)
        self.delay_s = 0.0  # added to every GraphQL answer (a slow provider: kill -9 tests)
        self.delay_after_refresh_s: float | None = None  # becomes delay_s once a refresh succeeded
        self.requests_limit = 5000
        self.requests_used = 0
        self._faults: list[_Fault] = []
        # Called with (operation, variables, Authorization header) before a GraphQL request is answered:
        # tests change the fake mid-sync (expire a token after the first page).
        self.before_graphql: list[Callable[[str, dict[str, Any], str], None]] = []
        self._last_ms = 0
        self._issued = 0
        self._schema = build_schema(SCHEMA_SDL)
        for gtype in self._schema.type_map.values():
            if isinstance(gtype, GraphQLObjectType) and not gtype.name.startswith("__"):
                for gfield in gtype.fields.values():
                    gfield.resolve = _resolve
        self._listen(_handler(self))

    # ---- server ---------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"

    @property
    def token_url(self) -> str:
        return self.base_url.removesuffix("/graphql") + "/oauth/token"

    # ---- clock ---------------------------------------------------------------------------------------
    def stamp(self, at: float | None = None) -> int:
        """Epoch ms for a change: `at` when given (seeding the past), else now, strictly after the last one and
        never ahead of the wall clock (a server whose clock agrees with the client's: skew is tested apart)."""
        with self.lock:
            if at is not None:
                return round(at * 1000)
            while _now_ms() <= self._last_ms:
                time.sleep(0.0005)
            self._last_ms = _now_ms()
            return self._last_ms

    # ---- identities -----------------------------------------------------------------------------------
    def add_user(self, name: str, *, email: str | None = None, teams: Iterable[str] = ()) -> str:
        with self.lock:
            uid = str(uuid.uuid4())
            self.users[uid] = FakeUser(uid, name, email or f"{name.lower().replace(' ', '.')}@acme.test", set(teams))
        return uid

    def add_api_key(self, key: str, user_id: str) -> str:
        with self.lock:
            self.tokens[key] = FakeToken(user_id, "key")
        return key

    def revoke(self, token: str) -> None:
        with self.lock:
            self.tokens[token].revoked = True

    def add_oauth_client(self, client_id: str, secret: str) -> None:
        with self.lock:
            self.clients[client_id] = secret

    def issue_oauth_tokens(self, user_id: str, client_id: str, *, expires_in: float | None = None) -> tuple[str, str]:
        """An OAuth app's token pair: an expiring access token and a rotating refresh token."""
        with self.lock:
            self._issued += 1
            access = f"lin_oauth_{self._issued:04d}{uuid.uuid4().hex[:12]}"
            refresh = f"lin_refresh_{self._issued:04d}{uuid.uuid4().hex[:12]}"
            lifetime = self.access_token_lifetime_s if expires_in is None else expires_in
            self.tokens[access] = FakeToken(user_id, "oauth", time.time() + lifetime)
            self.refresh_tokens[refresh] = (client_id, user_id)
        return access, refresh

    def expire(self, token: str) -> None:
        with self.lock:
            self.tokens[token].expires_at = time.time() - 1

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token dies (the user revoked the app): the next refresh is invalid_grant."""
        with self.lock:
            self.refresh_tokens.clear()

    # ---- data -----------------------------------------------------------------------------------------
    def add_team(
        self, key: str, name: str, *, private: bool = False, description: str = "", at: float | None = None
    ) -> str:
        with self.lock:
            tid, ms = str(uuid.uuid4()), self.stamp(at)
            self.teams[tid] = FakeTeam(tid, key, name, description, private, ms, ms)
        return tid

    def add_issue(
        self,
        team_id: str,
        title: str,
        description: str = "",
        *,
        state: str = "Todo",
        priority: int = 0,
        creator: str | None = None,
        assignee: str | None = None,
        labels: Iterable[str] = (),
        parent: str | None = None,
        at: float | None = None,
    ) -> str:
        with self.lock:
            team = self.teams[team_id]
            iid, ms = str(uuid.uuid4()), self.stamp(at)
            for label in labels:
                self.labels.setdefault(label, str(uuid.uuid4()))
            self.issues[iid] = FakeIssue(
                iid, team_id, team.next_number, title, description, state, priority, creator, assignee,
                list(labels), parent, ms, ms,
            )  # fmt: skip
            team.next_number += 1
        return iid

    def edit_issue(self, issue_id: str, **changes: Any) -> None:
        """Change fields (title, description, state, priority, assignee_id, labels, parent_id); stamps updatedAt."""
        with self.lock:
            issue = self.issues[issue_id]
            for key, value in changes.items():
                assert hasattr(issue, key), key
                setattr(issue, key, value)
            issue.updated_at = self.stamp()

    def move_issue(self, issue_id: str, team_id: str) -> None:
        """To another team: a new number and identifier there; the old identifier is kept as a previous one."""
        with self.lock:
            issue, team = self.issues[issue_id], self.teams[team_id]
            issue.previous_identifiers.append(self.identifier(issue))
            issue.team_id, issue.number = team_id, team.next_number
            team.next_number += 1
            issue.updated_at = self.stamp()

    def archive_issue(self, issue_id: str) -> None:
        with self.lock:
            issue = self.issues[issue_id]
            issue.archived_at = issue.updated_at = self.stamp()

    def trash_issue(self, issue_id: str) -> None:
        """Deleting an issue in Linear moves it to the trash: archived and trashed, purged after 30 days."""
        with self.lock:
            issue = self.issues[issue_id]
            issue.trashed, issue.archived_at = True, self.stamp()
            issue.updated_at = issue.archived_at

    def restore_issue(self, issue_id: str) -> None:
        with self.lock:
            issue = self.issues[issue_id]
            issue.trashed, issue.archived_at, issue.updated_at = False, None, self.stamp()

    def purge_issue(self, issue_id: str) -> None:
        """Gone for good (purged from the trash): no trace in any list."""
        with self.lock:
            del self.issues[issue_id]
            for cid in [c.id for c in self.comments.values() if c.issue_id == issue_id]:
                del self.comments[cid]
            for rid in [r.id for r in self.relations.values() if issue_id in (r.issue_id, r.related_id)]:
                del self.relations[rid]

    def relate(self, issue_id: str, related_id: str, kind: str, *, at: float | None = None) -> str:
        """``kind`` of IssueRelationType: blocks, duplicate, related, similar. Stamps both issues."""
        assert kind in ("blocks", "duplicate", "related", "similar"), kind
        with self.lock:
            rid, ms = str(uuid.uuid4()), self.stamp(at)
            self.relations[rid] = FakeRelation(rid, issue_id, related_id, kind, ms, ms)
            for iid in (issue_id, related_id):
                self.issues[iid].updated_at = max(self.issues[iid].updated_at, ms)
        return rid

    def add_comment(
        self,
        issue_id: str,
        body: str,
        *,
        user: str | None = None,
        bot: str | None = None,
        parent: str | None = None,
        at: float | None = None,
    ) -> str:
        """A comment (a reply when `parent` names a comment); a new comment stamps its issue, as in Linear."""
        with self.lock:
            cid, ms = str(uuid.uuid4()), self.stamp(at)
            self.comments[cid] = FakeComment(cid, issue_id, parent, body, user, bot, ms, ms)
            issue = self.issues[issue_id]
            issue.updated_at = max(issue.updated_at, ms)
        return cid

    def edit_comment(self, comment_id: str, body: str) -> None:
        with self.lock:
            comment = self.comments[comment_id]
            comment.body = body
            comment.edited_at = comment.updated_at = self.stamp()

    def delete_comment(self, comment_id: str) -> None:
        """Comments are deleted for good: gone from every list (only reconcile can notice)."""
        with self.lock:
            del self.comments[comment_id]

    def identifier(self, issue: FakeIssue) -> str:
        return f"{self.teams[issue.team_id].key}-{issue.number}"

    # ---- faults ---------------------------------------------------------------------------------------
    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        operation: str | None = None,
        stall_s: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """The next `times` GraphQL requests (of `operation`, when given) answer `status` after `stall_s`."""
        with self.lock:
            self._faults.append(_Fault(status, times, operation, stall_s, False, 0.0, headers or {}))

    def rate_limit_next(
        self, *, reset_in_s: float, times: int = 1, operation: str | None = None, status: int = 400
    ) -> None:
        """Linear's rate-limit answer: HTTP 400, ``RATELIMITED``, the requests budget spent until the reset."""
        with self.lock:
            self._faults.append(_Fault(status, times, operation, 0.0, True, reset_in_s, {}))

    # ---- what was asked -------------------------------------------------------------------------------
    def calls_of(self, operation: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.operation == operation]

    def graphql_calls(self) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.kind == "graphql"]

    def clear_calls(self) -> None:
        with self.lock:
            self.calls.clear()

    # ---- request handling -----------------------------------------------------------------------------
    def _take_fault(self, operation: str, *, explicit: bool = False) -> _Fault | None:
        """The first injected fault for `operation` (faults without one match any GraphQL request; the token
        endpoint, operation ``refresh_token``, only takes faults that name it)."""
        with self.lock:
            for fault in self._faults:
                if fault.operation == operation or (fault.operation is None and not explicit):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _rate_headers(self, *, spent_until_ms: int | None = None) -> dict[str, str]:
        reset = spent_until_ms if spent_until_ms is not None else _now_ms() + 3_600_000
        remaining = 0 if spent_until_ms is not None else max(0, self.requests_limit - self.requests_used)
        return {
            "X-RateLimit-Requests-Limit": str(self.requests_limit),
            "X-RateLimit-Requests-Remaining": str(remaining),
            "X-RateLimit-Requests-Reset": str(reset),
        }

    def _authenticate(self, header: str) -> FakeUser | None:
        bearer = header.startswith("Bearer ")
        value = header[7:].strip() if bearer else header.strip()
        token = self.tokens.get(value)
        if token is None or token.revoked or (token.kind == "oauth") != bearer:
            return None  # a personal key must go bare, an OAuth token as Bearer
        if token.expires_at is not None and time.time() >= token.expires_at:
            return None
        return self.users.get(token.user_id)

    def graphql(self, body: dict[str, Any], header: str) -> tuple[int, dict[str, Any], dict[str, str], float]:
        """(status, body, headers, stall seconds) of one GraphQL request."""
        operation = str(body.get("operationName") or "")
        variables = body.get("variables") if isinstance(body.get("variables"), dict) else {}
        with self.lock:
            self.requests_used += 1
            for hook in list(self.before_graphql):
                hook(operation, variables, header)
            fault = self._take_fault(operation)
            if fault is not None and fault.rate_limited:
                reset = _now_ms() + round(fault.reset_in_s * 1000)
                error = _error("Rate limit exceeded. Please try again later.", "RATELIMITED", 429)
                return fault.status, {"errors": [error]}, self._rate_headers(spent_until_ms=reset), 0.0
            if fault is not None:
                return (
                    fault.status,
                    {"errors": [_error("fault", "INTERNAL_SERVER_ERROR", 500)]},
                    fault.headers,
                    fault.stall_s,
                )
            user = self._authenticate(header)
            if user is None:
                error = _error("Authentication required, not authenticated", "AUTHENTICATION_ERROR", 401)
                return self.auth_error_status, {"errors": [error]}, self._rate_headers(), 0.0
            result = graphql_sync(
                self._schema,
                str(body.get("query") or ""),
                root_value=_Root(self),
                context_value=user,
                variable_values=variables,
                operation_name=operation or None,
            )
            formatted = result.formatted
            if result.data is None and result.errors:
                for error in formatted.get("errors") or []:
                    error.setdefault("extensions", {"code": "GRAPHQL_VALIDATION_FAILED", "statusCode": 400})
                return 400, formatted, self._rate_headers(), 0.0
            return 200, formatted, self._rate_headers(), 0.0

    def token(self, form: dict[str, str], basic: tuple[str, str] | None) -> tuple[int, dict[str, Any]]:
        with self.lock:
            fault = self._take_fault("refresh_token", explicit=True)
            if fault is not None:
                return fault.status, {"error": "server_error"}
            client_id, secret = basic or (form.get("client_id", ""), form.get("client_secret", ""))
            if self.clients.get(client_id) != secret or not client_id:
                return 401, {"error": "invalid_client", "error_description": "Client authentication failed"}
            if form.get("grant_type") != "refresh_token":
                return 400, {"error": "unsupported_grant_type"}
            grant = self.refresh_tokens.get(form.get("refresh_token", ""))
            if grant is None or grant[0] != client_id:
                return 400, {"error": "invalid_grant", "error_description": "The refresh token is invalid or revoked"}
            del self.refresh_tokens[form["refresh_token"]]  # rotation: the old refresh token is spent
            access, refresh = self.issue_oauth_tokens(grant[1], client_id)
            if self.delay_after_refresh_s is not None:
                self.delay_s = self.delay_after_refresh_s
            return 200, {
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": self.access_token_lifetime_s,
                "scope": "read",
                "refresh_token": refresh,
            }

    # ---- views for the resolvers ----------------------------------------------------------------------
    def visible_team(self, user: FakeUser, team_id: str) -> bool:
        team = self.teams.get(team_id)
        return team is not None and (not team.private or team_id in user.teams)

    def issue_url(self, issue: FakeIssue) -> str:
        return f"https://linear.app/{self.org['urlKey']}/issue/{self.identifier(issue)}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _error(message: str, code: str, status: int) -> dict[str, Any]:
    return {
        "message": message,
        "extensions": {"code": code, "statusCode": status, "userError": True, "userPresentableMessage": message},
    }


# ---- resolvers ------------------------------------------------------------------------------------------


def _resolve(obj: Any, info: GraphQLResolveInfo, **args: Any) -> Any:
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


class _Root:
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


# ---- HTTP -----------------------------------------------------------------------------------------------


def _handler(fake: FakeLinear) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            header = self.headers.get("Authorization") or ""
            if path == "/oauth/token":
                form = dict(parse_qsl(raw.decode(), keep_blank_values=True))
                basic = None
                if header.startswith("Basic "):
                    user, _, secret = base64.b64decode(header[6:]).decode().partition(":")
                    basic = (user, secret)
                status, body = fake.token(form, basic)
                with fake.lock:
                    fake.calls.append(Call("token", form.get("grant_type", ""), {}, header, form, status, time.time()))
                self._answer(status, body)
                return
            if path != "/graphql":
                self._answer(404, {"errors": [_error("Not found", "NOT_FOUND", 404)]})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._answer(400, {"errors": [_error("Body is not JSON", "BAD_REQUEST", 400)]})
                return
            status, answer, headers, stall = fake.graphql(body if isinstance(body, dict) else {}, header)
            with fake.lock:
                variables = dict(body.get("variables") or {}) if isinstance(body, dict) else {}
                operation = str(body.get("operationName") or "") if isinstance(body, dict) else ""
                fake.calls.append(Call("graphql", operation, variables, header, {}, status, time.time()))
            if stall or fake.delay_s:
                time.sleep(stall or fake.delay_s)
            self._answer(status, answer, headers)

    return Handler


# ---- seeding ----------------------------------------------------------------------------------------------


@dataclass
class Seeded:
    """Ids of the seeded workspace that tests refer to (by role)."""

    key: str
    user: str
    team: str
    other_team: str
    private_team: str
    issues: dict[str, str]
    comments: dict[str, str]
    relations: dict[str, str]


def seed_workspace(fake: FakeLinear, *, key: str = "lin_api_seeded_key", filler: int = 60) -> Seeded:
    """A team with nested issues (ENG-1 > ENG-2 > ENG-3, ENG-1 > ENG-4), a relation of each type, comment
    threads with replies, an archived and a trashed issue, `filler` more issues (pagination across pages),
    a second public team and a private team the key's user is not a member of. Spread over the last 10
    days, all in the past, so a sync after seeding sees it all and later changes are newer."""
    now = time.time()
    day = 86400.0
    alice = fake.add_user("Alice Doe")
    bob = fake.add_user("Bob Roe")
    fake.add_api_key(key, alice)
    eng = fake.add_team("ENG", "Engineering", description="Platform engineering", at=now - 30 * day)
    ops = fake.add_team("OPS", "Operations", at=now - 30 * day)
    sec = fake.add_team("SEC", "Security", private=True, at=now - 30 * day)
    t = now - 10 * day
    issues: dict[str, str] = {}
    issues["epic"] = fake.add_issue(
        eng, "Billing service migration", "Move **billing** to the new cluster.", state="In Progress",
        priority=2, creator=alice, assignee=bob, labels=["migration"], at=t,
    )  # fmt: skip
    issues["child"] = fake.add_issue(
        eng, "Migrate invoice rendering", "Invoices render through the new template engine.",
        creator=bob, parent=issues["epic"], labels=["migration", "invoices"], at=t + 60,
    )  # fmt: skip
    issues["grandchild"] = fake.add_issue(
        eng, "Port the PDF fonts", "The fonts live in the old asset bucket.", creator=bob,
        parent=issues["child"], at=t + 120,
    )  # fmt: skip
    issues["child2"] = fake.add_issue(
        eng, "Cut over the payment webhooks", "Webhooks point at the new endpoint.", state="Done",
        creator=alice, parent=issues["epic"], at=t + 180,
    )  # fmt: skip
    issues["blocker"] = fake.add_issue(
        eng, "Database failover drill", "Rehearse the failover before the cut-over.", priority=1,
        creator=alice, at=t + 240,
    )  # fmt: skip
    issues["dupe"] = fake.add_issue(eng, "Invoices look wrong", "Same as the rendering work.", creator=bob, at=t + 300)
    issues["similar"] = fake.add_issue(eng, "Receipt rendering", "Receipts use the old engine.", at=t + 360)
    issues["related"] = fake.add_issue(
        ops, "Provision the new cluster", "Capacity for billing.", creator=alice, at=t + 420
    )
    issues["archived"] = fake.add_issue(eng, "Old spike on caching", "Archived long ago.", at=t + 480)
    issues["trashed"] = fake.add_issue(eng, "Accidental duplicate ticket", "Deleted by its author.", at=t + 540)
    issues["secret"] = fake.add_issue(sec, "Rotate the signing keys", "Private team work.", at=t + 600)
    relations = {
        "blocks": fake.relate(issues["blocker"], issues["epic"], "blocks", at=t + 700),
        "duplicate": fake.relate(issues["dupe"], issues["child"], "duplicate", at=t + 710),
        "related": fake.relate(issues["epic"], issues["related"], "related", at=t + 720),
        "similar": fake.relate(issues["similar"], issues["child"], "similar", at=t + 730),
    }
    comments: dict[str, str] = {}
    comments["root"] = fake.add_comment(
        issues["epic"], "Kick-off: the migration starts with invoices.", user=alice, at=t + 800
    )
    comments["reply"] = fake.add_comment(
        issues["epic"], "Agreed, invoices first, then webhooks.", user=bob, parent=comments["root"], at=t + 860
    )
    comments["reply2"] = fake.add_comment(
        issues["epic"], "I will pair on the fonts.", user=alice, parent=comments["root"], at=t + 920
    )
    comments["other"] = fake.add_comment(issues["child"], "Template engine chosen: Jinja.", bot="GitHub", at=t + 980)
    comments["on_archived"] = fake.add_comment(issues["archived"], "Closing this spike.", user=bob, at=t + 1000)
    for n in range(filler):
        fake.add_issue(
            eng if n % 3 else ops, f"Routine task {n}", f"Housekeeping item {n} about {FILLER[n % len(FILLER)]}.",
            creator=alice if n % 2 else bob, at=t + 2000 + n * 600,
        )  # fmt: skip
    fake.archive_issue(issues["archived"])
    fake.issues[issues["archived"]].archived_at = fake.issues[issues["archived"]].updated_at = fake.stamp(now - day)
    fake.trash_issue(issues["trashed"])
    fake.issues[issues["trashed"]].archived_at = fake.issues[issues["trashed"]].updated_at = fake.stamp(now - day + 1)
    return Seeded(key, alice, eng, ops, sec, issues, comments, relations)


FILLER = ["backups", "alerts", "dashboards", "on-call", "runbooks", "certificates", "quotas", "logs"]

WORDS = [
    "deploy", "release", "incident", "customer", "billing", "invoice", "latency", "database", "index", "query",
    "cache", "migration", "roadmap", "design", "review", "budget", "security", "audit", "backup", "outage",
]  # fmt: skip


def seed_bulk(fake: FakeLinear, *, teams: int, issues: int, comments_per_issue: int, key: str) -> list[str]:
    """The benchmark workspace: `issues` issues over `teams` teams, each with `comments_per_issue` comments
    (every other one a reply), spread over the last 20 days. Returns the team ids."""
    now, span = time.time() - 60, 20 * 86400.0
    user = fake.add_user("Bench User")
    fake.add_api_key(key, user)
    team_ids = [fake.add_team(f"T{n:02d}", f"Team {n}", at=now - span - 60) for n in range(teams)]
    for n in range(issues):
        at = now - span + span * n / max(1, issues)
        text = " ".join(WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(14))
        iid = fake.add_issue(team_ids[n % teams], f"Task {n}: {text[:40]}", f"Issue {n}: {text}.", creator=user, at=at)
        parent: str | None = None
        for c in range(comments_per_issue):
            body = f"Comment {c} on task {n}: {' '.join(reversed(text.split()))}."
            cid = fake.add_comment(iid, body, user=user, parent=parent, at=at + 1 + c)
            parent = cid if c % 2 == 0 else None
    return team_ids
