"""The Notion connector provider (``ConnectorProvider``) on notion-client (base URL from
CTXSTORE_CONNECTOR_BASE_URL_NOTION, the SDK's default Notion-Version header, 2025-09-03).

Resources are the pages and data sources shared with the integration, as ``POST /v1/search`` lists them
(object filter ``page``, then ``data_source``; paged with Notion's cursor when discover asks for a
``limit``). Database rows are not listed as pages: they come with their data source. A page resource syncs
the page and every page below it; a data source resource syncs the data source and its rows. See
``notion_sync`` for the incremental mechanism and overlap, ``notion_reconcile`` for deletions,
``notion_markdown`` for the block rendering and links, ``notion_session`` for the error policy and the OAuth refresh.

Account scope: the workspace name (``users/me`` → ``bot.workspace_name``), as the reference documents; the
workspace id and bot id go into ``additional_metadata``. A token of a user-owned bot (no workspace name)
falls back to the workspace id, then the bot id.

OAuth (public integrations): ``refresh`` is one ``POST /v1/oauth/token`` (grant ``refresh_token``, basic
auth with the client id and secret) returning a new access token and a new refresh token; the service
persists the pair before it is used. A 401 on an OAuth connector raises ``TokenExpired`` so the service
refreshes and calls once more; ``invalid_grant`` raises ``RefreshRejected`` (needs_reauth).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.notion.info import INFO, validate_credentials
from ctxstore.connectors.notion.markdown import epoch, nid, title_of
from ctxstore.connectors.notion.reconcile import existing_pages, existing_rows
from ctxstore.connectors.notion.sync import (
    LIST_PAGE,
    iso,
    parent_ref,
    sync_data_source,
    sync_page_tree,
)
from ctxstore.ports.connector_provider import (
    AccountInfo,
    ConnectorProvider,
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
    from ctxstore.connectors.notion.session import NotionSession

KINDS = ("page", "data_source")  # discovery order; a paged discover's cursor is "<kind>:<notion cursor>"


class NotionProvider:
    info: ProviderInfo = INFO

    def validate_credentials(self, auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
        return validate_credentials(auth_type, credentials)

    def account(self, ctx: ProviderContext) -> AccountInfo:
        with _session(ctx) as session:
            me = session.me()
        bot: dict[str, Any] = me["bot"] if isinstance(me.get("bot"), dict) else {}
        name = str(bot.get("workspace_name") or "")
        workspace_id = str(bot.get("workspace_id") or "")
        scope = name or workspace_id or nid(me.get("id"))
        details = {"notion_workspace": name or scope, "notion_bot_id": nid(me.get("id"))}
        if workspace_id:
            details["notion_workspace_id"] = workspace_id
        return AccountInfo(account_scope=scope, account_name=name or scope, details=details)

    def discover(self, ctx: ProviderContext, *, cursor: str | None = None, limit: int | None = None) -> DiscoverPage:
        kind, _, notion_cursor = (cursor or "page:").partition(":")
        if kind not in KINDS:
            kind, notion_cursor = "page", ""
        found: list[DiscoveredResource] = []
        with _session(ctx) as session:
            while True:
                res = session.search(kind, cursor=notion_cursor or None, page_size=limit or LIST_PAGE)
                found.extend(r for r in map(_resource, res.get("results") or []) if r is not None)
                notion_cursor = str(res.get("next_cursor") or "") if res.get("has_more") else ""
                if not notion_cursor:
                    if kind == KINDS[-1]:
                        return DiscoverPage(found, None)
                    kind = KINDS[KINDS.index(kind) + 1]
                if limit is not None:
                    return DiscoverPage(found, f"{kind}:{notion_cursor}")

    def probe(self, ctx: ProviderContext, request: SyncRequest) -> bool:
        """A page: whether it is reachable (its tree is only known after a crawl). A data source: whether a row
        changed since `start` (one query of one row)."""
        with _session(ctx) as session:
            if _kind(request) == "page":
                page = session.page(nid(request.resource_id))
                return not (page.get("in_trash") or page.get("archived"))
            body = {
                "filter": {"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": iso(request.start)}},
                "page_size": 1,
            }
            return bool(session.query(nid(request.resource_id), body).get("results"))

    def sync(self, ctx: ProviderContext, request: SyncRequest) -> Iterator[SyncEvent]:
        kind = _kind(request)
        new_only = request.sync_mode == "new_only"
        with _session(ctx) as session:
            if kind == "page":
                yield from sync_page_tree(session, request, ctx.now(), new_only=new_only)
            else:
                yield from sync_data_source(session, request, ctx.now(), new_only=new_only)

    def reconcile(
        self, ctx: ProviderContext, request: SyncRequest, *, since: float | None, known: Sequence[KnownObject]
    ) -> list[str]:
        ids = [k.native_id for k in known]
        with _session(ctx) as session:
            if _kind(request) == "page":
                return existing_pages(session, nid(request.resource_id), ids)
            return existing_rows(session, nid(request.resource_id), since, ids)

    def refresh(self, ctx: ProviderContext) -> dict[str, Any]:
        from ctxstore.connectors.notion.session import refresh_oauth

        return refresh_oauth(ctx)


def _session(ctx: ProviderContext) -> NotionSession:
    # notion-client (with httpx) is imported only when a call is made, so the catalogue costs nothing.
    from ctxstore.connectors.notion.session import NotionSession

    return NotionSession(ctx)


def _kind(request: SyncRequest) -> str:
    if request.resource_type in KINDS:
        return request.resource_type
    if isinstance(request.checkpoint, dict) and request.checkpoint.get("type") in KINDS:
        return str(request.checkpoint["type"])
    raise ResourceUnavailable(
        f"Notion resources are of type page or data_source (got {request.resource_type!r} for"
        f" {request.resource_id!r}): configure it from the discovered resources"
    )


def _resource(obj: object) -> DiscoveredResource | None:
    """A search result as a resource; database rows (pages whose parent is a data source) are not resources."""
    if not isinstance(obj, dict) or not obj.get("id") or obj.get("in_trash") or obj.get("archived"):
        return None
    kind = str(obj.get("object") or "")
    parent_kind, parent_id = parent_ref(obj)
    if kind not in KINDS or (kind == "page" and parent_kind in ("data_source_id", "database_id")):
        return None
    rid = nid(obj["id"])
    title = title_of(obj) or "Untitled"
    metadata: dict[str, Any] = {
        "title": title,
        "url": obj.get("url"),
        "parent_type": parent_kind,
        "parent_id": parent_id or None,
        "top_level": parent_kind == "workspace",
        "last_edited_time": obj.get("last_edited_time"),
    }
    if kind == "data_source" and isinstance(obj.get("database_parent"), dict):
        metadata["database_parent_id"] = nid(obj["database_parent"].get("page_id")) or None
    if epoch(obj.get("created_time")) is not None:
        metadata["created_time"] = obj.get("created_time")
    return DiscoveredResource(resource_id=rid, resource_type=kind, name=title, metadata=metadata)


def build_provider() -> ConnectorProvider:
    """The provider instance the connector service registers (stateless: one serves every connector)."""
    return NotionProvider()
