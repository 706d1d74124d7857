"""The Gmail connector provider (``ConnectorProvider``) on google-api-python-client with google-auth.

Resources are labels (``users.labels.list``: INBOX, SENT, the user's labels; resource type ``label``).
Objects are messages (kind ``email``, native id = the Gmail message id), grouped by thread: ``thread_id`` is
the thread's first message, a reply's ``parent_id`` the message its In-Reply-To/References name (``reply_to``
link), attachments of accepted formats child file items (``gmail_mapping``). The cursor is the mailbox's
``historyId``; the first sync is bounded by ``lookback_days``, later ones read ``users.history.list``, and a
history gap (404) is a bounded resync (``gmail_sync``). Calls, waits and error mapping: ``gmail_client``.

Account: ``users.getProfile``. ``provider_account_scope`` is empty, as the reference documents for Gmail;
the mailbox address goes into every item's ``additional_metadata.account_email`` (and names the account,
so a credential update for another mailbox is refused).

OAuth only: ``refresh`` is one refresh-token grant through google-auth at ``ctx.token_url``; the service
persists the result before the next call. Deletions come from history (``reconcile`` lists a label only
after a resync).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.gmail.info import INFO, validate_credentials
from ctxstore.ports.connector_provider import (
    AccountInfo,
    ConnectorProvider,
    CredentialsRejected,
    DiscoveredResource,
    DiscoverPage,
    KnownObject,
    ProviderContext,
    ProviderInfo,
    ResourceUnavailable,
    SyncEvent,
    SyncRequest,
)

if TYPE_CHECKING:
    from ctxstore.connectors.gmail.client import GmailSession

SYSTEM_ORDER = ("INBOX", "SENT", "IMPORTANT", "STARRED", "DRAFT", "UNREAD", "SPAM", "TRASH")


class GmailProvider:
    info: ProviderInfo = INFO

    def validate_credentials(self, auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
        return validate_credentials(auth_type, credentials)

    def account(self, ctx: ProviderContext) -> AccountInfo:
        profile = _session(ctx).call(
            "getProfile", lambda api: api.users().getProfile(userId="me"), missing=CredentialsRejected
        )
        address = str((profile or {}).get("emailAddress") or "")
        if not address:
            raise CredentialsRejected("gmail getProfile answered without an emailAddress")
        return AccountInfo(account_scope="", account_name=address, details={"account_email": address})

    def discover(self, ctx: ProviderContext, *, cursor: str | None = None, limit: int | None = None) -> DiscoverPage:
        """Every label of the mailbox (labels.list has no paging: a page here is a slice of it)."""
        data = _session(ctx).call(
            "labels.list", lambda api: api.users().labels().list(userId="me"), missing=CredentialsRejected
        )
        labels = [x for x in (data or {}).get("labels") or [] if isinstance(x, dict) and x.get("id")]
        rank = {name: i for i, name in enumerate(SYSTEM_ORDER)}
        labels.sort(key=lambda x: (x.get("type") != "system", rank.get(str(x["id"]), 99), str(x.get("name") or "")))
        resources = [
            DiscoveredResource(
                resource_id=str(x["id"]),
                resource_type="label",
                name=str(x.get("name") or x["id"]),
                metadata={"name": x.get("name"), "type": x.get("type"), "label_id": x["id"]},
            )
            for x in labels
        ]
        start = int(cursor) if cursor and cursor.isdigit() else 0
        if limit is None:
            return DiscoverPage(resources[start:], None)
        end = start + limit
        return DiscoverPage(resources[start:end], str(end) if end < len(resources) else None)

    def probe(self, ctx: ProviderContext, request: SyncRequest) -> bool:
        from ctxstore.connectors.gmail.sync import LabelSync

        page = LabelSync(_session(ctx), ctx, _label_of(request)).list_page(request.start, None, 1)
        return bool(page.get("messages"))

    def sync(self, ctx: ProviderContext, request: SyncRequest) -> Iterator[SyncEvent]:
        from ctxstore.connectors.gmail.sync import sync_label

        yield from sync_label(_session(ctx), ctx, _label_of(request), request.checkpoint, request.start)

    def reconcile(
        self, ctx: ProviderContext, request: SyncRequest, *, since: float | None, known: Sequence[KnownObject]
    ) -> list[str] | None:
        """Only right after a resync (history reported every other deletion): the label's ids since the
        oldest object the service holds."""
        from ctxstore.connectors.gmail.sync import LabelSync

        if not (request.checkpoint or {}).get("reconcile"):
            return None
        stamps = [k.created_at for k in known if k.created_at is not None]
        if not stamps:
            return []
        return LabelSync(_session(ctx), ctx, _label_of(request)).existing_since(min(stamps))

    def refresh(self, ctx: ProviderContext) -> dict[str, Any]:
        from ctxstore.connectors.gmail.client import refresh_oauth

        return refresh_oauth(ctx)


def _session(ctx: ProviderContext) -> GmailSession:
    # The discovery client and google-auth take most of a second to import: only when a call is made.
    from ctxstore.connectors.gmail.client import GmailSession

    return GmailSession(ctx)


def _label_of(request: SyncRequest) -> str:
    if request.resource_type not in ("label", "") or not request.resource_id.strip():
        raise ResourceUnavailable(
            f"Gmail resources are labels of type label (got {request.resource_type} {request.resource_id!r})"
        )
    return request.resource_id


def build_provider() -> ConnectorProvider:
    """The provider instance the connector service registers (stateless: one serves every connector)."""
    return GmailProvider()
