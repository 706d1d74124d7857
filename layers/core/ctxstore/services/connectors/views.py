"""What the connector routes answer: connector and resource objects in the reference's shapes, plus state.

Connector answers mirror `database`/`collection` and `tenant_id`/`sub_tenant_id` (Versioning rule 4); a
resource mirrors its effective and override scope under both names. Nothing secret is ever in a view:
credentials live in their own sealed record and `credential_ref` only names it.
"""

from __future__ import annotations

from typing import Any

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.connector_rules import CATALOGUE, LifecycleInputs, lifecycle
from ctxstore.ports.connector_provider import DiscoverPage, ProviderInfo
from ctxstore.ports.records import Record
from ctxstore.services.connectors import answers as ca

ACTIVE = "active"
INACTIVE = "inactive"
ERROR = "error"
RUNNING = "running"
IDLE = "idle"


def _ts(value: object) -> str | None:
    return iso(float(value)) if isinstance(value, int | float) and not isinstance(value, bool) else None


def is_active(resource: dict[str, Any]) -> bool:
    return resource.get("status") != INACTIVE


def first_sync_done(resource: dict[str, Any]) -> bool:
    return resource.get("first_sync_completed_at") is not None


def running(connector: dict[str, Any], now: float) -> bool:
    """A sync holds the lease right now (a killed worker's lease runs out; it never stays `running`)."""
    lease = connector.get("lease_until")
    return connector.get("sync_status") == RUNNING and isinstance(lease, int | float) and lease > now


def lifecycle_inputs(
    connector: dict[str, Any], resources: list[dict[str, Any]], now: float, unindexed: bool
) -> LifecycleInputs:
    active = [r for r in resources if is_active(r)]
    return LifecycleInputs(
        needs_reauth=bool(connector.get("needs_reauth")),
        sync_blocked=bool(connector.get("sync_blocked")),
        running=running(connector, now),
        active_resources=len(active),
        pending_first_sync=sum(1 for r in active if not first_sync_done(r)),
        backlog=sum(1 for r in active if r.get("has_more")),
        unindexed=unindexed,
    )


def _message(state: str, c: dict[str, Any], s: LifecycleInputs) -> str:
    if state == "reconnect":
        if c.get("needs_reauth"):
            reason = c.get("needs_reauth_reason") or "invalid_grant"
            return f"Reconnect: the provider refused the refresh token ({reason})."
        return f"Sync blocked: {c.get('sync_blocked_reason') or 'credentials rejected'}. Update the credentials."
    if state == "syncing":
        return "A sync is running."
    if state == "pending_setup":
        return "No active resources: discover resources and configure the connector."
    if state == "ingesting":
        if s.pending_first_sync or s.backlog:
            return f"First sync in progress: {max(s.pending_first_sync, s.backlog)} resource(s) not caught up yet."
        return "Synced objects are being indexed."
    if c.get("last_error"):
        return f"The last sync failed and will be retried: {c['last_error']}"
    return "Up to date."


def connector_view(
    rec: Record, resources: list[dict[str, Any]], bounds: tuple[int, int] | None, now: float, unindexed: bool
) -> ca.ConnectorView:
    c = rec.data
    inputs = lifecycle_inputs(c, resources, now, unindexed)
    state = lifecycle(inputs)
    out: ca.ConnectorView = {
        "connector_id": c["connector_id"],
        "provider": c["provider"],
        "name": c.get("name") or "",
        "database": c["database"],
        "collection": c.get("collection") or "",
        "tenant_id": c["database"],
        "sub_tenant_id": c.get("collection") or "",
        "provider_account_scope": c.get("provider_account_scope") or "",
        "auth_type": c.get("auth_type") or "api_token",
        "status": "active",  # the spec: always active (a scheduler-internal constant)
        "sync_engine": "classic",
        "lifecycle": state,
        "message": _message(state, c, inputs),
        "sync_status": RUNNING if inputs.running else IDLE,
        "active_resource_count": inputs.active_resources,
        "resources_pending_first_sync": inputs.pending_first_sync,
        "documents_dispatched": int(c.get("documents_dispatched") or 0),
        "first_data_dispatched_at": _ts(c.get("first_data_dispatched_at")),
        "first_sync_at": _ts(c.get("first_sync_at")),
        "last_successful_sync_at": _ts(c.get("last_successful_sync_at")),
        "last_attempted_sync_at": _ts(c.get("last_attempted_sync_at")),
        "next_sync_at": _ts(c.get("next_sync_at")),
        "last_error": c.get("last_error") or "",
        "needs_reauth": bool(c.get("needs_reauth")),
        "needs_reauth_at": c.get("needs_reauth_at"),
        "needs_reauth_reason": c.get("needs_reauth_reason") or "",
        "sync_blocked": bool(c.get("sync_blocked")),
        "sync_blocked_at": c.get("sync_blocked_at"),
        "sync_blocked_reason": c.get("sync_blocked_reason") or "",
        "sync_cycles_completed": int(c.get("sync_cycles_completed") or 0),
        "custom_instructions": c.get("custom_instructions") or "",
        "sync_interval_seconds": int(c["sync_interval_seconds"]),
        "credential_ref": f"cred_{c['connector_id']}",
        "org_id": c.get("org_id"),
        "user_id": c.get("user_id"),
        "account_name": (c.get("account") or {}).get("account_name", ""),
        "created_at": _ts(c.get("created_at")),
        "updated_at": _ts(c.get("updated_at")),
        "last_run": c.get("last_run"),
        # POST /sync?full=true: resources reconciled before this time are reconciled over everything synced
        "full_sync_requested_at": _ts(c.get("full_sync_requested_at")),
    }
    if bounds is not None:
        out["min_sync_interval_seconds"], out["max_sync_interval_seconds"] = bounds
    return out


def resource_view(connector: dict[str, Any], r: dict[str, Any]) -> ca.ResourceView:
    database = r.get("database_override") or connector["database"]
    collection = r.get("collection_override") or connector.get("collection") or ""
    done = first_sync_done(r)
    health = {
        "last_status": r.get("last_status") or ("ok" if done else "pending"),
        "last_error": r.get("last_error") or "",
        "objects_synced": int(r.get("objects_synced") or 0),
        "objects_deleted": int(r.get("objects_deleted") or 0),
        "failures": list(r.get("failures") or []),
        "last_synced_at": _ts(r.get("last_synced_at")),
        "last_reconciled_at": _ts(r.get("last_reconciled_at")),
    }
    backfilling = not done or bool(r.get("has_more"))
    return {
        "connector_id": connector["connector_id"],
        "resource_id": r["resource_id"],
        "resource_type": r.get("resource_type") or "",
        "name": r.get("name") or "",
        "display_name": r.get("name") or "",
        "status": r.get("status") or ACTIVE,
        "database": database,
        "collection": collection,
        "tenant_id": database,
        "sub_tenant_id": collection,
        "database_override": r.get("database_override") or "",
        "collection_override": r.get("collection_override") or "",
        "tenant_id_override": r.get("database_override") or "",
        "sub_tenant_id_override": r.get("collection_override") or "",
        "metadata": r.get("metadata") or {},
        "additional_metadata": r.get("additional_metadata") or {},
        "custom_instructions": r.get("custom_instructions"),
        "sync_mode": r.get("sync_mode") or "rescan",
        "filters": {"lookback_days": r.get("lookback_days"), "sync_mode": r.get("sync_mode") or "rescan"},
        # Non-empty only once the first sync has finished (the reference: it "confirms the first sync has run").
        "provider_cursor": (r.get("provider_cursor") or "") if done else "",
        "provider_metadata": {**(r.get("provider_metadata") or {}), "health": health},
        "backfill_status": "active" if backfilling and r.get("status") != INACTIVE else "",
        "backfill_oldest": _ts(r.get("first_sync_start")) if backfilling else "",
        "backfill_next_chunk_at": _ts(r.get("backfill_next_chunk_at")) if backfilling else "",
        "backfill_chunk_interval_seconds": int(r.get("backfill_chunk_interval_seconds") or 0),
        "first_sync_completed_at": _ts(r.get("first_sync_completed_at")),
        "created_at": _ts(r.get("created_at")),
        "updated_at": _ts(r.get("updated_at")),
    }


def _fields(items: Any) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in vars(f).items() if v is not None or k != "filter_key"} | {"filter_key": f.filter_key}
        for f in items
    ]


def provider_view(i: ProviderInfo, bounds: tuple[int, int, int], reconcile_interval: int) -> ca.ProviderView:
    """One provider's catalogue entry; bounds are the sync interval's (default, min, max)."""
    return {
        "provider": i.provider,
        "display_name": i.display_name,
        "category": i.category,
        "connector_type": i.category,
        "auth_types": list(i.auth_types),
        "resource_types": list(i.resource_types),
        "indexed_object_types": list(i.indexed_object_types),
        "searchable_fields": _fields(i.searchable_fields),
        "filterable_fields": _fields(i.filterable_fields),
        "credential_schema": i.credential_schema,
        "setup_guide": i.setup_guide,
        "default_sync_interval_seconds": bounds[0],
        "min_sync_interval_seconds": bounds[1],
        "max_sync_interval_seconds": bounds[2],
        "reconcile_window_seconds": i.reconcile_window_s,
        "reconcile_interval_seconds": reconcile_interval,
    }


def catalogue_view(available: set[str]) -> ca.Catalogue:
    """Every provider of the catalogue, with whether this server has it."""
    return {
        "providers": [
            {
                "provider": e.provider,
                "category": e.category,
                "supported": e.provider in available,
                "moveit_support": False,
                "is_alpha": False,
                "is_beta": False,
                "rank": e.rank,
            }
            for e in CATALOGUE
        ]
    }


def discover_page_view(provider: str, page: DiscoverPage, paged: bool) -> ca.DiscoverPageView:
    return {
        "provider": provider,
        "resources": [
            {"id": r.resource_id, "name": r.name, "resource_type": r.resource_type, "metadata": r.metadata}
            for r in page.resources
        ],
        # Always named (the reference's discoverResponseBody): null and false once nothing is left.
        "next_cursor": page.next_cursor if paged else None,
        "has_more": paged and page.next_cursor is not None,
    }
