"""What the `/connectors*` routes render: connector and resource records, their sync state, the provider
catalogue and discovery pages, exactly their JSON keys (built in `views.py`, `service.py`, `resources.py`).
Provider-defined parts (credential schema, resource metadata, a run's summary) stay plain dicts."""

from __future__ import annotations

from typing import Any, TypedDict


class _ConnectorFields(TypedDict):
    connector_id: str
    provider: str
    name: str
    database: str
    collection: str
    tenant_id: str
    sub_tenant_id: str
    provider_account_scope: str
    auth_type: str
    status: str
    sync_engine: str
    lifecycle: str
    message: str
    sync_status: str
    active_resource_count: int
    resources_pending_first_sync: int
    documents_dispatched: int
    first_data_dispatched_at: str | None
    first_sync_at: str | None
    last_successful_sync_at: str | None
    last_attempted_sync_at: str | None
    next_sync_at: str | None
    last_error: str
    needs_reauth: bool
    needs_reauth_at: str | None
    needs_reauth_reason: str
    sync_blocked: bool
    sync_blocked_at: str | None
    sync_blocked_reason: str
    sync_cycles_completed: int
    custom_instructions: str
    sync_interval_seconds: int
    credential_ref: str
    org_id: str | None
    user_id: str | None
    account_name: str
    created_at: str | None
    updated_at: str | None
    last_run: dict[str, Any] | None
    full_sync_requested_at: str | None


# total=False rather than NotRequired: with postponed annotations only this is seen at run time too.
class ConnectorView(_ConnectorFields, total=False):
    """A connector and its sync state (lifecycle, lease, errors); the interval bounds when its provider is
    available on this server."""

    min_sync_interval_seconds: int
    max_sync_interval_seconds: int


class ConnectorList(TypedDict):
    connectors: list[ConnectorView]


class ConnectorUpdated(TypedDict):
    """PATCH /connectors/{id}: the interval in force and its bounds, and what changed."""

    connector_id: str
    sync_interval_seconds: int
    min_sync_interval_seconds: int
    max_sync_interval_seconds: int
    default_sync_interval_seconds: int
    next_sync_at: str | None
    credentials_updated: bool
    custom_instructions: str
    name: str


class ConnectorDeleted(TypedDict):
    deleted: bool
    connector_id: str


class SyncQueued(TypedDict):
    """POST /connectors/{id}/sync: the queued run."""

    run_id: str
    workflow_id: str
    full: bool


class ResourceFilters(TypedDict):
    lookback_days: int | None
    sync_mode: str


class ResourceView(TypedDict):
    """One configured resource: its effective and override scope (under both names), sync and backfill state."""

    connector_id: str
    resource_id: str
    resource_type: str
    name: str
    display_name: str
    status: str
    database: str
    collection: str
    tenant_id: str
    sub_tenant_id: str
    database_override: str
    collection_override: str
    tenant_id_override: str
    sub_tenant_id_override: str
    metadata: dict[str, Any]
    additional_metadata: dict[str, Any]
    custom_instructions: str | None
    sync_mode: str
    filters: ResourceFilters
    provider_cursor: str
    provider_metadata: dict[str, Any]
    backfill_status: str
    backfill_oldest: str | None
    backfill_next_chunk_at: str | None
    backfill_chunk_interval_seconds: int
    first_sync_completed_at: str | None
    created_at: str | None
    updated_at: str | None


class ResourceList(TypedDict):
    resources: list[ResourceView]


class Configured(TypedDict):
    """POST /connectors/{id}/configure: how many resources are active now and whether a first sync runs."""

    connector_id: str
    configured: int
    backfill: bool
    lookback_days: int
    next_sync_at: str | None
    run_id: str | None
    message: str
    warnings: list[str]


class ResourceDeleted(TypedDict):
    connector_id: str
    deleted: bool
    resource_id: str


class ProviderView(TypedDict):
    """GET /connectors/providers?provider=…: one provider's catalogue entry with its interval bounds."""

    provider: str
    display_name: str
    category: str
    connector_type: str
    auth_types: list[str]
    resource_types: list[str]
    indexed_object_types: list[str]
    searchable_fields: list[dict[str, Any]]
    filterable_fields: list[dict[str, Any]]
    credential_schema: dict[str, Any]
    setup_guide: str
    default_sync_interval_seconds: int
    min_sync_interval_seconds: int
    max_sync_interval_seconds: int
    reconcile_window_seconds: int | None
    reconcile_interval_seconds: int


class CatalogueEntry(TypedDict):
    provider: str
    category: str
    supported: bool
    moveit_support: bool
    is_alpha: bool
    is_beta: bool
    rank: int


class Catalogue(TypedDict):
    """GET /connectors/providers: every provider of the catalogue, with whether this server has it."""

    providers: list[CatalogueEntry]


class DiscoveredResource(TypedDict):
    id: str
    name: str
    resource_type: str
    metadata: dict[str, Any]


class DiscoverPageView(TypedDict):
    """One page of a provider's discoverable resources; `next_cursor` and `has_more` always named."""

    provider: str
    resources: list[DiscoveredResource]
    next_cursor: str | None
    has_more: bool
