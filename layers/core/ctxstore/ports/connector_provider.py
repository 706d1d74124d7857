"""Connector providers: the one interface every external provider (Slack, GitHub, Linear, Notion, Gmail) implements.

The shape is the one open connector frameworks converged on (Onyx's checkpointed connectors, Airbyte's
cursors): a provider lists the resources an account can sync (channels, repos, teams, pages, labels), and
syncs one resource from a stored checkpoint as a stream of events: objects to upsert, objects deleted at
the provider, per-object failures, and checkpoints. The connector service (services/connectors) owns
everything else: credentials, schedules, leases, ids, ingestion, deletions, state fields.

Rules a provider follows (the service relies on them):
- ``sync`` yields a ``Checkpoint`` after every unit of work (typically one page of the provider's API).
  Everything yielded before a checkpoint is covered by it: resuming from that checkpoint never skips an
  object the provider had not yielded yet. Re-yielding an object after a resume is allowed (ids are
  deterministic, so it is an upsert).
- The last event of a sync is a ``Checkpoint``; ``has_more=False`` means the resource is caught up.
  The service may stop consuming at any checkpoint (a bounded chunk of a large first sync) and call
  ``sync`` again later with that checkpoint.
- A first sync (``checkpoint is None``) covers objects changed at or after ``SyncRequest.start``
  (now minus ``lookback_days``); later syncs are incremental from the checkpoint and never rescan the
  whole resource. Providers that cannot see edits or replies through their cursor alone (Slack thread
  replies to old parents) re-read a bounded recent window and say so in their module docstring.
- ``native_id`` is unique within one provider account; the service derives the item id from
  provider + account scope + native id, so the same object always lands on the same item.
- Errors are the exceptions below, never SDK exceptions: the service maps each to connector state.
- Nothing here retries forever or sleeps past ``ProviderContext.max_wait_s``: a longer provider-requested
  wait is ``RateLimited`` and the service reschedules.
- OAuth (``auth_type == "oauth"``): credentials hold ``access_token``, ``refresh_token``, ``expires_at``
  (epoch s; absent when the provider did not say), ``client_id``, ``client_secret``. The service refreshes:
  before any call when ``expires_at`` is within ``REFRESH_SKEW_S``, and once more when a call raises
  ``TokenExpired``. It serialises refreshes of one connector and persists the rotated set compare-and-set
  BEFORE handing it to the next call, so a single-use refresh token is never spent twice. A provider
  implements ``refresh`` (one token-endpoint exchange) and never stores tokens itself, except through
  ``ctx.save_credentials`` when its SDK rotates tokens on its own (google-auth does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# ---- catalogue -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldInfo:
    """A field of synced objects, as the providers catalogue (`GET /connectors/providers?id=`) lists it."""

    name: str
    data_type: str  # "string" | "integer" | "boolean" | "datetime" | "string[]"
    description: str
    filter_key: str | None = None  # metadata_filters key that matches it, when filterable


@dataclass(frozen=True)
class ProviderInfo:
    provider: str  # "slack" | "github" | "linear" | "notion" | "gmail"
    category: str  # "chat" | "code" | "issue_tracker" | "wiki" | "mail"
    display_name: str
    auth_types: tuple[str, ...]  # values of the connector's `auth_type`: "api_token", "oauth"
    credential_schema: dict[str, Any]  # JSON Schema of `credentials` (per auth type under "oneOf" if several)
    resource_types: tuple[str, ...]  # "channel", "repo", "linear_team", "page", "data_source", "label"
    indexed_object_types: tuple[str, ...]  # SyncedObject.kind values it produces
    searchable_fields: tuple[FieldInfo, ...] = ()
    filterable_fields: tuple[FieldInfo, ...] = ()
    default_sync_interval_s: int = 3600
    min_sync_interval_s: int = 300
    max_sync_interval_s: int = 604800
    setup_guide: str = ""  # short text: which token, which scopes
    # Deletions: the service calls `reconcile(since=now - reconcile_window_s)` for a caught-up resource
    # (None: since=None, the whole resource), bounded because a listing costs provider calls, at most once
    # per `reconcile_interval_s` per resource (0: every cycle, for a provider whose listing is as cheap as
    # its incremental read), and over the whole resource on an explicit full sync.
    reconcile_window_s: int | None = 30 * 86400
    reconcile_interval_s: int = 6 * 3600


# ---- what a call gets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccountInfo:
    """Who the credentials belong to, from a live call (Slack auth.test, GitHub /user, Gmail getProfile)."""

    account_scope: str  # provider_account_scope: Slack team id, GitHub login/org, Linear/Notion workspace, "" for Gmail
    account_name: str
    # e.g. {"account_email": ...}: copied into every synced item's additional_metadata
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProviderContext:
    """Everything one provider call may use. Built by the service per sync; never holds another org's data."""

    credentials: dict[str, Any]  # decrypted, as validated by the provider; never logged
    auth_type: str  # "api_token" | "oauth"
    base_url: str  # API base fixed by the server (CTXSTORE_CONNECTOR_BASE_URL_<PROVIDER>), never by a caller
    token_url: str | None = None  # OAuth token endpoint (CTXSTORE_CONNECTOR_TOKEN_URL_<PROVIDER>)
    # Persist rotated credentials (new access/refresh token, expiry) atomically; a provider calls it
    # right after a refresh and before the new refresh token is used again.
    save_credentials: Callable[[dict[str, Any]], None] = lambda creds: None
    sleep: Callable[[float], None] = lambda s: None  # the service's interruptible sleep (rate-limit waits)
    rate_limited: Callable[[float], None] = lambda s: None  # told each provider-requested wait it sits out (metrics)
    now: Callable[[], float] = lambda: 0.0  # the service's clock, epoch seconds
    http_timeout_s: float = 30.0
    max_wait_s: float = 60.0  # longest provider-requested wait sat out inside one call
    # The account the connector was created for (as `account` answered then); None before creation
    # (discovery preview) and for the `account` call itself. Providers use it for permalinks, mailbox ids.
    account: AccountInfo | None = None


@dataclass(frozen=True)
class DiscoveredResource:
    resource_id: str
    resource_type: str
    name: str
    metadata: dict[str, Any] = field(default_factory=dict)  # provider facts (private, member count, default branch)


@dataclass(frozen=True)
class DiscoverPage:
    resources: list[DiscoveredResource]
    next_cursor: str | None = None  # opaque; None when there is no more


@dataclass(frozen=True)
class SyncRequest:
    resource_id: str
    resource_type: str
    checkpoint: dict[str, Any] | None  # None: first sync of this resource
    start: float  # epoch s: the first sync covers objects changed at or after it (now - lookback_days)
    sync_mode: Literal["rescan", "new_only"] = "rescan"  # new_only: skip edits of already-synced objects
    resource_metadata: dict[str, Any] = field(default_factory=dict)  # as discovered


# ---- what a sync yields ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectLink:
    native_id: str  # the other object's native_id (same provider account)
    relation: str  # "reply_to", "comment_on", "references", "blocks", "duplicate", "related", "linked_to"


@dataclass(frozen=True)
class Attachment:
    """A file of an object (mail attachment), parsed by the same parsers as uploads when its format is accepted."""

    filename: str
    content_type: str | None
    data: bytes


@dataclass(frozen=True)
class SyncedObject:
    native_id: str
    kind: str  # "message" | "issue" | "pull_request" | "comment" | "page" | "email" | ...
    title: str
    text: str  # plain text or markdown, what gets indexed
    url: str | None = None
    author: str | None = None
    created_at: float | None = None  # epoch s at the provider
    updated_at: float | None = None  # epoch s of the last edit at the provider
    thread_native_id: str | None = None  # the thread's root object (itself for a root with replies)
    parent_native_id: str | None = None  # parent object (the message replied to, the issue a comment is on)
    links: tuple[ObjectLink, ...] = ()
    native_fields: dict[str, Any] = field(default_factory=dict)  # provider-native ids (slack_ts, issue_number, ...)
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class DeletedObject:
    native_id: str  # deleted (or archived/trashed) at the provider: the service removes its item


@dataclass(frozen=True)
class ObjectFailure:
    native_id: str | None  # None when the object could not even be identified
    message: str  # one object could not be read; the sync goes on


@dataclass(frozen=True)
class Checkpoint:
    state: dict[str, Any]  # JSON-serialisable; stored per resource and passed back on the next sync
    cursor: str  # human-readable position shown as the resource's provider_cursor (a Slack ts, an ISO time)
    has_more: bool  # True while backlog remains (a large first sync continues in the next chunk)


SyncEvent = SyncedObject | DeletedObject | ObjectFailure | Checkpoint


@dataclass(frozen=True)
class KnownObject:
    """An object the service holds from earlier syncs (its index), as handed to `reconcile`."""

    native_id: str
    thread_native_id: str | None
    created_at: float | None


# ---- errors ----------------------------------------------------------------------------------------


class ProviderError(Exception):
    """Base of what a provider raises; the message is shown as the connector's last_error (no secrets)."""


class RateLimited(ProviderError):
    """The provider asked to wait longer than max_wait_s. Transient: the service retries after the wait."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TransientProviderError(ProviderError):
    """5xx, timeout, connection failure, a refresh the token endpoint could not answer: retry next cycle."""


class CredentialsRejected(ProviderError):
    """Revoked or invalid credentials, or a missing scope, on a data call: sync_blocked until updated."""


class TokenExpired(ProviderError):
    """The access token has expired (an OAuth token past its lifetime): the service refreshes and calls once
    more; for an `api_token` connector, or when a fresh token is refused too, it is CredentialsRejected."""


class RefreshRejected(ProviderError):
    """An OAuth refresh grant was rejected (invalid_grant or the provider's equivalent): needs_reauth."""


class ResourceUnavailable(ProviderError):
    """This one resource is gone or no longer shared: a per-resource failure, the connector is not blocked."""


# ---- the interface ---------------------------------------------------------------------------------


class ConnectorProvider(Protocol):
    info: ProviderInfo

    def validate_credentials(self, auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
        """Check the shape against info.credential_schema; return the normalised set.
        Raises ValueError with a message naming the missing or malformed field (no network call)."""
        ...

    def account(self, ctx: ProviderContext) -> AccountInfo:
        """One live call that proves the credentials work and names the account."""
        ...

    def discover(self, ctx: ProviderContext, *, cursor: str | None = None, limit: int | None = None) -> DiscoverPage:
        """Resources these credentials can sync. Without limit, every resource in one page."""
        ...

    def probe(self, ctx: ProviderContext, request: SyncRequest) -> bool:
        """Cheap check (one small call) whether a first sync of the resource would produce anything."""
        ...

    def sync(self, ctx: ProviderContext, request: SyncRequest) -> Iterator[SyncEvent]:
        """Objects changed since the checkpoint (or request.start), deletions seen, failures, checkpoints."""
        ...

    def reconcile(
        self, ctx: ProviderContext, request: SyncRequest, *, since: float | None, known: Sequence[KnownObject]
    ) -> Iterable[str] | None:
        """Native ids that exist now among the resource's objects created at or after `since` (None: all).
        `known` lists the objects of that range the service holds: the service deletes the items of those
        missing from the answer. A provider may vouch for known objects without a call when it can tell
        nothing of theirs changed (Slack: a thread whose reply count matches), and may list ids beyond
        `known` (ignored). None: unsupported (the provider reports deletions as DeletedObject instead)."""
        ...

    def refresh(self, ctx: ProviderContext) -> dict[str, Any]:
        """OAuth only: exchange ctx.credentials' refresh token at ctx.token_url for a new set and return the
        whole set (old keys kept, new access/refresh token and expires_at). No storing: the service persists
        it. RefreshRejected when the grant is refused (invalid_grant and equivalents), CredentialsRejected
        when the client id/secret are, TransientProviderError when the endpoint cannot answer. A provider
        without OAuth raises NotImplementedError."""
        ...


REFRESH_SKEW_S = 300.0  # refresh an OAuth access token this long before its expires_at


def oauth_expiring(credentials: dict[str, Any], now: float, skew_s: float = REFRESH_SKEW_S) -> bool:
    """Whether an OAuth credential set should be refreshed before use (unknown expiry: no)."""
    expires_at = credentials.get("expires_at")
    return isinstance(expires_at, int | float) and not isinstance(expires_at, bool) and expires_at - skew_s <= now
