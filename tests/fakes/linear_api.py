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

from graphql import GraphQLError, GraphQLObjectType, build_schema, graphql_sync

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
        # The resolvers read this module's tables: imported here, once the module is whole.
        from tests.fakes.linear_resolvers import resolve_field

        self._schema = build_schema(SCHEMA_SDL)
        for gtype in self._schema.type_map.values():
            if isinstance(gtype, GraphQLObjectType) and not gtype.name.startswith("__"):
                for gfield in gtype.fields.values():
                    gfield.resolve = resolve_field
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
        from tests.fakes.linear_resolvers import Root

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
                root_value=Root(self),
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
