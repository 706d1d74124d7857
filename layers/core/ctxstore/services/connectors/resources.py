"""A connector's resources: configure (validate, enrich from discover, probe, activate), list, add, delete.

The resources half of the connector service (`service.py`), which it reaches for the connector records,
credentials, providers and scheduling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxstore.domain import connector_rules as rules
from ctxstore.domain import metadata_schema as ms
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.ingest_request import capped_object, json_object
from ctxstore.ports.connector_provider import (
    ConnectorProvider,
    CredentialsRejected,
    DiscoverPage,
    ProviderError,
    RefreshRejected,
    ResourceUnavailable,
    SyncRequest,
    TokenExpired,
)
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.connectors import answers as ca
from ctxstore.services.connectors.provider_errors import provider_failure
from ctxstore.services.connectors.views import ACTIVE, INACTIVE, first_sync_done, is_active, resource_view, running

if TYPE_CHECKING:
    from ctxstore.services.connectors.service import ConnectorService

MAX_RESOURCES_PER_CONFIGURE = 1000


def _resource_id(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 512 or any(ord(c) < 32 for c in value):
        raise invalid(f"'{where}' must be a non-empty string of at most 512 printable characters")
    return value


def _chunk_interval(value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 604800):
        raise invalid("'backfill_chunk_interval_seconds' must be an integer from 0 to 604800")
    return value


def _fill_from_discovery(cfg: dict[str, Any], known: dict[str, Any]) -> bool:
    """Names, types and provider metadata from discover; False if discover answered without this resource."""
    found = known.get(cfg["resource_id"])
    if found is None:
        return not known  # discover failed or listed nothing: no warning
    cfg["resource_type"] = cfg["resource_type"] or found.resource_type
    cfg["name"] = cfg["name"] or found.name
    cfg["provider_metadata"] = dict(found.metadata)
    return True


class ConnectorResources:
    def __init__(self, svc: ConnectorService) -> None:
        self._svc = svc

    def _resource_config(
        self, principal: Principal, c: dict[str, Any], raw: dict[str, Any], where: str
    ) -> dict[str, Any]:
        resource_id = _resource_id(raw.get("resource_id"), f"{where}resource_id")
        database = raw.get("database") or ""
        collection = raw.get("collection") or ""
        if database or collection:
            self._svc._check_target(principal, str(database or c["database"]), str(collection), where)
        metadata = capped_object(raw.get("metadata"), f"{where}metadata", rules.RESOURCE_METADATA_CAP)
        additional = capped_object(
            raw.get("additional_metadata"),
            f"{where}additional_metadata",
            rules.RESOURCE_ADDITIONAL_METADATA_CAP,
        )
        schema = self._svc._databases.schema(principal, str(database or c["database"]))
        declared = {f.name for f in schema}
        system = {"provider": c["provider"], "connector_id": c["connector_id"]}
        # Declared keys must fit their types (undeclared ones are stored, not filterable).
        ms.validate_metadata(
            schema, {k: v for k, v in {**metadata, **system}.items() if k in declared}, f"{where}metadata"
        )
        sync_mode = raw.get("sync_mode") or "rescan"
        if sync_mode not in rules.SYNC_MODES:
            raise invalid(f"'{where}sync_mode' must be 'rescan' or 'new_only'")
        out: dict[str, Any] = {
            "resource_id": resource_id,
            "resource_type": raw.get("resource_type") or "",
            "name": raw.get("name") or "",
            "database_override": database,
            "collection_override": collection,
            "metadata": metadata,
            "additional_metadata": additional,
            "sync_mode": sync_mode,
        }
        if "custom_instructions" in raw and raw["custom_instructions"] is not None:
            out["custom_instructions"] = rules.check_custom_instructions(
                raw["custom_instructions"], f"{where}custom_instructions"
            )
        return out

    def _save_resource(
        self, org: str, connector_id: str, cfg: dict[str, Any], lookback_days: int | None, chunk_interval: int | None
    ) -> dict[str, Any]:
        """Create or reconfigure one resource, active; its checkpoint and cursor are kept."""
        now = self._svc._clock.now()
        existing = self._svc.store.resource(org, connector_id, cfg["resource_id"])
        data: dict[str, Any] = dict(existing.data) if existing else {"created_at": now, "checkpoint": None}
        data.update(cfg, status=ACTIVE, updated_at=now, configured_at=now)
        if existing is not None and "custom_instructions" not in cfg:
            data["custom_instructions"] = existing.data.get("custom_instructions")
        elif "custom_instructions" not in cfg:
            data["custom_instructions"] = None
        # lookback_days counts for the first sync only; until that starts it may still be changed.
        if not first_sync_done(data) and (lookback_days is not None or "lookback_days" not in data):
            data["lookback_days"] = lookback_days if lookback_days is not None else rules.DEFAULT_LOOKBACK_DAYS
            if data.get("checkpoint") is None:
                data["first_sync_start"] = None
        if chunk_interval is not None:
            data["backfill_chunk_interval_seconds"] = chunk_interval
        if data.get("last_status") == "error":
            data["last_status"], data["last_error"] = None, ""
        self._svc.store.put_resource(org, connector_id, cfg["resource_id"], data)
        return data

    def _probe(
        self,
        provider: ConnectorProvider,
        probe: Callable[[SyncRequest], bool],
        resource: dict[str, Any],
        lookback_days: int,
    ) -> str | None:
        """None when the resource would produce something; else why it is a warning."""
        name = resource.get("name") or resource["resource_id"]
        request = SyncRequest(
            resource_id=resource["resource_id"],
            resource_type=resource.get("resource_type") or "",
            checkpoint=None,
            start=self._svc._clock.now() - lookback_days * 86400,
            resource_metadata=dict(resource.get("provider_metadata") or {}),
        )
        try:
            if probe(request):
                return None
            return f"resource '{name}' ({resource['resource_id']}) produced nothing when probed"
        except (ResourceUnavailable, CredentialsRejected, TokenExpired, RefreshRejected) as exc:
            raise provider_failure(provider.info.provider, exc) from None
        except ProviderError as exc:
            return f"resource '{name}' ({resource['resource_id']}) could not be probed: {exc}"

    @staticmethod
    def _discovered(discover: Callable[[], DiscoverPage]) -> dict[str, Any]:
        """Resource facts by id, from one discover call (used to fill names, types and provider metadata)."""
        try:
            page = discover()
        except ProviderError:
            return {}
        return {r.resource_id: r for r in page.resources}

    def _configs(self, principal: Principal, c: dict[str, Any], raw_resources: list[Any]) -> list[dict[str, Any]]:
        """The configure body's resources, validated, each listed once."""
        configs: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i, raw in enumerate(raw_resources):
            cfg = self._resource_config(principal, c, json_object(raw, f"resources[{i}]"), f"resources[{i}].")
            if cfg["resource_id"] in seen:
                raise invalid(f"resource '{cfg['resource_id']}' is listed twice")
            seen.add(cfg["resource_id"])
            configs.append(cfg)
        return configs

    def configure(self, principal: Principal, connector_id: str, body: dict[str, Any]) -> ca.Configured:
        _, auth = self._svc._ready()
        rec = self._svc._connector(principal, connector_id)
        c = rec.data
        provider = self._svc._provider(c["provider"])
        raw_resources = body.get("resources")
        if not isinstance(raw_resources, list) or not raw_resources:
            raise invalid("'resources' must be a non-empty list of resources from the discover operation")
        if len(raw_resources) > MAX_RESOURCES_PER_CONFIGURE:
            raise invalid(f"at most {MAX_RESOURCES_PER_CONFIGURE} resources per configure")
        if body.get("table_configs"):
            raise invalid("'table_configs' is accepted only for connectors whose engine reads them (not classic)")
        lookback = rules.check_lookback_days(body.get("lookback_days"))
        chunk_interval = _chunk_interval(body.get("backfill_chunk_interval_seconds"))
        configs = self._configs(principal, c, raw_resources)
        seen = {cfg["resource_id"] for cfg in configs}
        ctx = self._svc._call(provider, lambda: auth.context(principal.org, c, provider))
        # Both refresh and retry once when the access token died before its expires_at, like a sync.
        known = self._discovered(lambda: auth.call(principal.org, c, provider, ctx, lambda: provider.discover(ctx)))

        def probe(request: SyncRequest) -> bool:
            return auth.call(principal.org, c, provider, ctx, lambda: provider.probe(ctx, request))

        warnings: list[str] = []
        for cfg in configs:
            if not _fill_from_discovery(cfg, known):
                warnings.append(f"resource '{cfg['resource_id']}' was not among the discovered resources")
            existing = self._svc.store.resource(principal.org, connector_id, cfg["resource_id"])
            if existing is None or not first_sync_done(existing.data):
                warning = self._probe(provider, probe, cfg, lookback)
                if warning:
                    warnings.append(warning)
        for cfg in configs:
            self._save_resource(principal.org, connector_id, cfg, lookback, chunk_interval)
        for r in self._svc.store.resources(principal.org, connector_id):  # the selection replaces the active set
            if r.sk not in seen and is_active(r.data):
                self._svc.store.update_resource(principal.org, connector_id, r.sk, lambda d: dict(d, status=INACTIVE))
        now = self._svc._clock.now()
        run_id = self._svc.scheduling.enqueue(principal.org, connector_id, "configure")

        def configured(d: dict[str, Any]) -> dict[str, Any]:
            d = dict(d, updated_at=now, sync_blocked=False, sync_blocked_at=None, sync_blocked_reason="")
            if run_id is not None or not running(d, now):
                d["next_sync_at"] = now  # configure starts a sync (or the running one continues with them)
            return d

        updated = self._svc.store.update(principal.org, connector_id, configured)
        if updated is not None and run_id is None:
            self._svc.scheduling.reschedule(principal.org, updated.data)
        resources = [r.data for r in self._svc.store.resources(principal.org, connector_id) if is_active(r.data)]
        backfill = any(not first_sync_done(r) for r in resources)
        return {
            "connector_id": connector_id,
            "configured": len(configs),
            "backfill": backfill,
            "lookback_days": lookback,
            "next_sync_at": self._svc._view(principal.org, updated)["next_sync_at"] if updated else None,
            "run_id": run_id,
            "message": (
                f"{len(configs)} resource(s) configured; the first sync has started"
                if backfill
                else f"{len(configs)} resource(s) configured; cursors kept, syncing incrementally"
            ),
            "warnings": warnings,
        }

    def list_resources(self, principal: Principal, connector_id: str) -> ca.ResourceList:
        rec = self._svc._connector(principal, connector_id)
        return {
            "resources": [
                resource_view(rec.data, r.data) for r in self._svc.store.resources(principal.org, connector_id)
            ]
        }

    def add_resource(self, principal: Principal, connector_id: str, body: dict[str, Any]) -> ca.ResourceView:
        self._svc._ready()
        rec = self._svc._connector(principal, connector_id)
        c = rec.data
        filters = json_object(body.get("filters"), "filters")
        raw = {
            "resource_id": body.get("resource_id"),
            "resource_type": body.get("resource_type"),
            "name": body.get("display_name") or body.get("name"),
            "database": body.get("database_override"),
            "collection": body.get("collection_override"),
            "metadata": body.get("metadata"),
            "additional_metadata": body.get("additional_metadata"),
            "sync_mode": body.get("sync_mode") or filters.get("sync_mode"),
            "custom_instructions": body.get("custom_instructions"),
        }
        cfg = self._resource_config(principal, c, raw, "")
        cfg["provider_metadata"] = json_object(body.get("provider_metadata"), "provider_metadata")
        lookback = filters.get("lookback_days", body.get("lookback_days"))
        data = self._save_resource(
            principal.org,
            connector_id,
            cfg,
            rules.check_lookback_days(lookback) if lookback is not None else None,
            None,
        )
        now = self._svc._clock.now()
        if (
            not first_sync_done(data)
            and self._svc.scheduling.enqueue(principal.org, connector_id, "resource") is not None
        ):
            self._svc.store.update(principal.org, connector_id, lambda d: dict(d, next_sync_at=now))
        return resource_view(c, data)

    def delete_resource(self, principal: Principal, connector_id: str, resource_id: str) -> ca.ResourceDeleted:
        self._svc._connector(principal, connector_id)
        if self._svc.store.resource(principal.org, connector_id, resource_id) is None:
            raise ApiError(ErrorCode.NOT_FOUND, f"resource '{resource_id}' is not configured on this connector")
        self._svc._records.delete(principal.org, rk.CONNECTOR_RESOURCE, connector_id, resource_id)
        self._svc.store.drop_objects(principal.org, connector_id, resource_id)
        return {"connector_id": connector_id, "deleted": True, "resource_id": resource_id}
