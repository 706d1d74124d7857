"""The connector service: what the `/connectors*` routes do, provider-neutral (providers come from bootstrap).

Organisation isolation: every record lives in the caller's organisation partition, so another
organisation's connector is looked up and not found, exactly like one that does not exist (404).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, overload

from ctxstore import observability as obs
from ctxstore.config import ConnectorSettings
from ctxstore.domain import connector_rules as rules
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.ingest_request import json_object
from ctxstore.domain.scopes import validate_collection_name, validate_database_name
from ctxstore.ports.clock import Clock
from ctxstore.ports.connector_provider import ConnectorProvider, ProviderContext, ProviderError
from ctxstore.ports.credential_vault import CredentialVault
from ctxstore.ports.records import ConditionFailed, Delete, Put, RecordStore
from ctxstore.ports.scheduler import Scheduler
from ctxstore.ports.work_queue import Job, WorkQueue
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.connectors import answers as ca
from ctxstore.services.connectors.credentials import ConnectorAuth, CredentialStore
from ctxstore.services.connectors.dispatch import Dispatcher, unindexed
from ctxstore.services.connectors.provider_errors import provider_failure
from ctxstore.services.connectors.resources import ConnectorResources
from ctxstore.services.connectors.scheduling import SyncScheduling, workflow_id
from ctxstore.services.connectors.store import ConnectorStore
from ctxstore.services.connectors.sync_run import SyncLimits, SyncRunner
from ctxstore.services.connectors.views import (
    catalogue_view,
    connector_view,
    discover_page_view,
    is_active,
    provider_view,
    running,
)
from ctxstore.services.databases import DatabaseService
from ctxstore.services.items.catalog import ItemCatalog
from ctxstore.services.items.ingest import IngestService
from ctxstore.services.items.locks import ItemLocks
from ctxstore.services.items.service import ItemService

log = logging.getLogger("ctxstore.connectors")
MAX_DISCOVER_LIMIT = 100
AUTH_TYPES = ("api_token", "oauth")


def _not_found(connector_id: str) -> ApiError:
    return ApiError(ErrorCode.NOT_FOUND, f"connector '{connector_id}' not found")


class ConnectorService:
    def __init__(
        self,
        records: RecordStore,
        clock: Clock,
        queue: WorkQueue,
        scheduler: Scheduler | None,
        vault: Callable[[], CredentialVault] | None,
        providers: Mapping[str, ConnectorProvider],
        databases: DatabaseService,
        ingest: IngestService,
        catalog: ItemCatalog,
        items: ItemService,
        *,
        settings: ConnectorSettings | None = None,
        single_process: bool = True,
    ) -> None:
        """`scheduler`: None in an AWS function whose template entry sets no CTXSTORE_SCHEDULER_GROUP (no timed syncs).
        `vault`: a provider (see CredentialStore); None where connector credentials have no key (AWS without
        CTXSTORE_CONNECTOR_KMS_KEY_ID): connectors then answer SERVICE_UNAVAILABLE.
        `single_process`: locks and sync leases may live in this process (Capabilities.single_process)."""
        self._records = records
        self._clock = clock
        self.settings = o = settings or ConnectorSettings()
        self._databases = databases
        self._items = items
        self.providers: dict[str, ConnectorProvider] = dict(providers)
        self.store = ConnectorStore(records)
        self.scheduling = SyncScheduling(queue, scheduler, clock)
        self._stop = threading.Event()
        self._creds = CredentialStore(records, vault, clock) if vault is not None else None
        locks = ItemLocks(records, single_process=single_process)
        self._auth = (
            ConnectorAuth(self._creds, self.store, locks, clock, self._context_defaults)
            if self._creds is not None
            else None
        )
        self.limits = SyncLimits(
            chunk_objects=max(1, o.chunk_objects),
            chunk_seconds=max(1.0, o.chunk_seconds),
            continue_after_s=max(0.0, o.continue_after_s),
            lease_s=o.chunk_seconds + 2 * o.max_wait_s + 4 * o.http_timeout_s + 60,
            single_process=single_process,
            reconcile_interval_s=o.reconcile_interval_s if o.reconcile_interval_s >= 0 else None,
        )
        self.resources = ConnectorResources(self)
        self.runner = (
            SyncRunner(
                self.store,
                self._auth,
                Dispatcher(self.store, ingest, catalog),
                self.providers,
                clock,
                self.limits,
                self.scheduling.reschedule,
                self._stop.is_set,
            )
            if self._auth is not None
            else None
        )

    # ---- plumbing ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Wake any provider wait (rate-limit sleeps) so a shutting-down server does not sit them out."""
        self._stop.set()

    def _context_defaults(self, provider: str) -> dict[str, Any]:
        o = self.settings
        base_url, token_url = o.urls(provider)
        return {
            "base_url": base_url,
            "token_url": token_url or None,
            "sleep": self._stop.wait,
            "rate_limited": lambda seconds: obs.observe(obs.CONNECTOR_RATE_LIMIT_WAIT, seconds, provider=provider),
            "now": self._clock.now,
            "http_timeout_s": o.http_timeout_s,
            "max_wait_s": o.max_wait_s,
        }

    def _bounds(self, provider: ConnectorProvider) -> tuple[int, int, int]:
        """(default, min, max) sync_interval_seconds; the server may lower every provider's floor."""
        i = provider.info
        floor = self.settings.min_interval_s
        low = min(i.min_sync_interval_s, floor) if floor > 0 else i.min_sync_interval_s
        return i.default_sync_interval_s, low, i.max_sync_interval_s

    def _reconcile_interval(self, provider: ConnectorProvider) -> int:
        """Least time between two deletion reconciles of one resource (0: every cycle)."""
        cadence = self.limits.reconcile_interval_s
        return provider.info.reconcile_interval_s if cadence is None else cadence

    def _ready(self) -> tuple[CredentialStore, ConnectorAuth]:
        if self._creds is None or self._auth is None:
            raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "connectors are not configured on this deployment")
        return self._creds, self._auth

    def _provider(self, name: object, field: str = "provider") -> ConnectorProvider:
        if not isinstance(name, str) or not name:
            raise invalid(f"'{field}' is required: one of {', '.join(rules.PROVIDER_IDS)}")
        provider = self.providers.get(name)
        if provider is None:
            if name in rules.PROVIDER_IDS:
                raise invalid(f"provider '{name}' is not available on this server")
            raise invalid(f"unknown provider '{name}'; expected one of {', '.join(rules.PROVIDER_IDS)}")
        return provider

    def _connector(self, principal: Principal, connector_id: str) -> Any:
        rec = self.store.get(principal.org, connector_id)
        if rec is None:
            raise _not_found(connector_id)
        return rec

    def _call(self, provider: ConnectorProvider, fn: Any) -> Any:
        try:
            return fn()
        except ProviderError as exc:
            raise provider_failure(provider.info.provider, exc) from None

    def _view(self, org: str, rec: Any) -> ca.ConnectorView:
        now = self._clock.now()
        resources = [r.data for r in self.store.resources(org, rec.sk)]
        provider = self.providers.get(str(rec.data["provider"]))
        bounds = self._bounds(provider)[1:] if provider else None
        return connector_view(rec, resources, bounds, now, unindexed(self._items, org, rec.data, now))

    def _check_target(self, principal: Principal, database: str, collection: str, where: str) -> None:
        validate_database_name(database, f"{where}database")
        validate_collection_name(collection, f"{where}collection")
        self._databases.require(principal, database)

    # ---- providers catalogue ---------------------------------------------------------------------
    @overload
    def catalogue(self, provider_id: None) -> ca.Catalogue: ...
    @overload
    def catalogue(self, provider_id: str) -> ca.ProviderView: ...  # an empty id lists the catalogue, as None does
    def catalogue(self, provider_id: str | None) -> ca.Catalogue | ca.ProviderView:
        if not provider_id:
            return catalogue_view(set(self.providers))
        provider = self.providers.get(provider_id)
        if provider is None:
            raise ApiError(ErrorCode.NOT_FOUND, f"provider '{provider_id}' is not available on this server")
        return provider_view(provider.info, self._bounds(provider), self._reconcile_interval(provider))

    # ---- create / read / update / delete -----------------------------------------------------------
    def create(self, principal: Principal, body: dict[str, Any]) -> ca.ConnectorView:
        creds_store, _ = self._ready()
        provider = self._provider(body.get("provider"))
        info = provider.info
        auth_type = body.get("auth_type") or ""
        credentials = json_object(body.get("credentials"), "credentials")
        if not credentials:
            raise invalid('\'credentials\' is required (an object, e.g. {"access_token": "..."})')
        if not auth_type:
            auth_type = "oauth" if credentials.get("refresh_token") and "oauth" in info.auth_types else "api_token"
        if auth_type not in info.auth_types:
            raise invalid(f"'auth_type' must be one of {', '.join(info.auth_types)} for {info.provider}")
        try:
            credentials = provider.validate_credentials(auth_type, credentials)
        except ValueError as exc:
            raise invalid(f"credentials: {exc}") from None
        instructions = rules.check_custom_instructions(body.get("custom_instructions"))
        default_s, min_s, max_s = self._bounds(provider)
        interval = rules.resolve_interval(
            body.get("sync_interval_seconds"), default_s=default_s, min_s=min_s, max_s=max_s
        )
        name = body.get("name")
        if name is not None and not isinstance(name, str):
            raise invalid("'name' must be a string")
        database = body.get("database")
        if not database:
            raise invalid("'database' is required")
        collection = body.get("collection") or ""
        self._check_target(principal, str(database), str(collection), "")
        scope = body.get("provider_account_scope")
        if scope is not None and (not isinstance(scope, str) or len(scope) > 256 or "\x1f" in scope):
            raise invalid("'provider_account_scope' must be a string of at most 256 characters")
        now = self._clock.now()
        connector_id = f"conn_{uuid.uuid4().hex}"
        ctx = ProviderContext(credentials=credentials, auth_type=auth_type, **self._context_defaults(info.provider))
        account = self._call(provider, lambda: provider.account(ctx))
        credentials = ctx.credentials  # as used (a provider may normalise)
        scope = scope if scope else account.account_scope
        data: dict[str, Any] = {
            "connector_id": connector_id,
            "provider": info.provider,
            "name": name or f"{info.provider} {account.account_name or scope}".strip(),
            "database": database,
            "collection": collection,
            "provider_account_scope": scope,
            "auth_type": auth_type,
            "account": {
                "account_scope": account.account_scope,
                "account_name": account.account_name,
                "details": account.details,
            },
            "custom_instructions": instructions,
            "sync_interval_seconds": interval,
            "org_id": principal.org,
            "user_id": principal.key_prefix,
            "created_at": now,
            "updated_at": now,
            "next_sync_at": now + interval,
            "sync_status": "idle",
            "documents_dispatched": 0,
            "sync_cycles_completed": 0,
            "last_error": "",
            "needs_reauth": False,
            "sync_blocked": False,
        }
        ops: list[Put | Delete] = [
            Put(rk.CONNECTOR_SCOPE, info.provider, scope, {"connector_id": connector_id}, if_absent=True),
            creds_store.sealed_put(principal.org, connector_id, credentials, if_version=None),
            Put(rk.CONNECTOR, "", connector_id, data, if_absent=True),
        ]
        try:
            self._records.transact(principal.org, ops)
        except ConditionFailed:
            raise ApiError(
                ErrorCode.CONFLICT,
                f"a {info.provider} connector for account scope '{scope}' already exists in this organisation;"
                " provider_account_scope must be distinct (objects of one scope share ids)",
            ) from None
        self.scheduling.reschedule(principal.org, data)
        log.info("connector %s created (%s, scope %s)", connector_id, info.provider, scope)
        return self._view(principal.org, self._connector(principal, connector_id))

    def list_connectors(self, principal: Principal, provider: str | None) -> ca.ConnectorList:
        out = [
            self._view(principal.org, rec)
            for rec in self.store.connectors(principal.org)
            if not provider or rec.data.get("provider") == provider
        ]
        return {"connectors": out}

    def get(self, principal: Principal, connector_id: str) -> ca.ConnectorView:
        return self._view(principal.org, self._connector(principal, connector_id))

    def update(self, principal: Principal, connector_id: str, body: dict[str, Any]) -> ca.ConnectorUpdated:
        creds_store, _ = self._ready()
        rec = self._connector(principal, connector_id)
        c = rec.data
        provider = self._provider(c["provider"])
        info = provider.info
        default_s, min_s, max_s = self._bounds(provider)
        known = {"sync_interval_seconds", "credentials", "custom_instructions", "name"}
        if not any(k in body and body[k] is not None for k in known):
            raise invalid("nothing to update: send sync_interval_seconds, credentials, custom_instructions or name")
        now = self._clock.now()
        changes: dict[str, Any] = {}
        if body.get("sync_interval_seconds") is not None:
            interval = rules.resolve_interval(
                body["sync_interval_seconds"], default_s=default_s, min_s=min_s, max_s=max_s
            )
            anchor = c.get("last_attempted_sync_at") or c.get("created_at") or now
            changes["sync_interval_seconds"] = interval
            if not c.get("sync_blocked"):  # a new cadence takes effect at once: re-anchor the next sync
                changes["next_sync_at"] = max(now, float(anchor) + interval)
        if "custom_instructions" in body and body["custom_instructions"] is not None:
            changes["custom_instructions"] = rules.check_custom_instructions(body["custom_instructions"])
        if body.get("name") is not None:
            if not isinstance(body["name"], str):
                raise invalid("'name' must be a string")
            changes["name"] = body["name"]
        credentials_updated = False
        if body.get("credentials") is not None:
            supplied = json_object(body["credentials"], "credentials")
            stored, version = creds_store.load(principal.org, connector_id)
            merged = {**stored, **supplied}
            auth_type = str(c.get("auth_type") or "api_token")
            try:
                merged = provider.validate_credentials(auth_type, merged)
            except ValueError as exc:
                raise invalid(f"credentials: {exc}") from None
            ctx = ProviderContext(credentials=merged, auth_type=auth_type, **self._context_defaults(info.provider))
            account = self._call(provider, lambda: provider.account(ctx))
            # The account is its scope; a provider without one (Gmail: the scope stays empty) by its name.
            stored = c.get("account") or {}
            expected, got = stored.get("account_scope"), account.account_scope
            if not expected:
                expected, got = stored.get("account_name"), account.account_name
            if expected and got != expected:
                raise ApiError(
                    ErrorCode.INVALID_INPUT,
                    f"these credentials belong to {info.provider} account '{got}', not"
                    f" '{expected}'; create another connector for another account",
                )
            try:
                creds_store.save(principal.org, connector_id, ctx.credentials, if_version=version)
            except ConditionFailed:
                raise ApiError(
                    ErrorCode.CONFLICT, "the stored credentials changed meanwhile (a token rotation); retry"
                ) from None
            credentials_updated = True
            changes.update(needs_reauth=False, needs_reauth_at=None, needs_reauth_reason="")
            if c.get("sync_blocked"):  # only a credential or config update clears it: sync soon
                changes.update(sync_blocked=False, sync_blocked_at=None, sync_blocked_reason="", next_sync_at=now)

        def apply(d: dict[str, Any]) -> dict[str, Any]:
            return dict(d, **changes, updated_at=now)

        updated = self.store.update(principal.org, connector_id, apply)
        if updated is None:
            raise _not_found(connector_id)
        self.scheduling.reschedule(principal.org, updated.data)
        d = updated.data
        return {
            "connector_id": connector_id,
            "sync_interval_seconds": int(d["sync_interval_seconds"]),
            "min_sync_interval_seconds": min_s,
            "max_sync_interval_seconds": max_s,
            "default_sync_interval_seconds": default_s,
            "next_sync_at": self._view(principal.org, updated)["next_sync_at"],
            "credentials_updated": credentials_updated,
            "custom_instructions": d.get("custom_instructions") or "",
            "name": d.get("name") or "",
        }

    def delete(self, principal: Principal, connector_id: str) -> ca.ConnectorDeleted:
        creds_store, _ = self._ready()
        rec = self._connector(principal, connector_id)
        org = principal.org
        scope = str(rec.data.get("provider_account_scope") or "")
        self.scheduling.cancel(org, connector_id)
        # The connector record goes first: a sync running now stops at its next checkpoint (ConnectorGone).
        self._records.transact(
            org,
            [
                Delete(rk.CONNECTOR, "", connector_id),
                Delete(rk.CONNECTOR_SCOPE, str(rec.data["provider"]), scope),
            ],
        )
        creds_store.delete(org, connector_id)
        for r in self.store.resources(org, connector_id):
            self._records.delete(org, rk.CONNECTOR_RESOURCE, connector_id, r.sk)
        self.store.drop_objects(org, connector_id)
        log.info("connector %s deleted", connector_id)
        return {"deleted": True, "connector_id": connector_id}

    # ---- discovery ---------------------------------------------------------------------------------
    @staticmethod
    def _limit(limit: int | None) -> int | None:
        if limit is None:
            return None
        if limit < 1:
            raise invalid("'limit' must be between 1 and 100")
        return min(limit, MAX_DISCOVER_LIMIT)

    def discover(
        self, principal: Principal, connector_id: str, cursor: str | None, limit: int | None
    ) -> ca.DiscoverPageView:
        _, auth = self._ready()
        rec = self._connector(principal, connector_id)
        provider = self._provider(rec.data["provider"])
        n = self._limit(limit)
        ctx = self._call(provider, lambda: auth.context(principal.org, rec.data, provider))
        page = self._call(
            provider,
            lambda: auth.call(
                principal.org, rec.data, provider, ctx, lambda: provider.discover(ctx, cursor=cursor, limit=n)
            ),
        )
        return discover_page_view(provider.info.provider, page, cursor is not None or limit is not None)

    def preview(self, body: dict[str, Any], cursor: str | None, limit: int | None) -> ca.DiscoverPageView:
        """Resources visible to credentials before any connector exists; nothing is stored (no token rotation)."""
        provider = self._provider(body.get("provider"))
        info = provider.info
        credentials = json_object(body.get("credentials"), "credentials")
        if not credentials:
            raise invalid("'credentials' is required")
        auth_type = body.get("auth_type") or "api_token"
        if auth_type not in info.auth_types:
            raise invalid(f"'auth_type' must be one of {', '.join(info.auth_types)} for {info.provider}")
        try:
            credentials = provider.validate_credentials(str(auth_type), credentials)
        except ValueError as exc:
            raise invalid(f"credentials: {exc}") from None
        n = self._limit(limit)
        ctx = ProviderContext(
            credentials=credentials, auth_type=str(auth_type), **self._context_defaults(info.provider)
        )
        page = self._call(provider, lambda: provider.discover(ctx, cursor=cursor, limit=n))
        return discover_page_view(info.provider, page, cursor is not None or limit is not None)

    # ---- resources (services/connectors/resources.py) ----------------------------------------------
    def configure(self, principal: Principal, connector_id: str, body: dict[str, Any]) -> ca.Configured:
        return self.resources.configure(principal, connector_id, body)

    def list_resources(self, principal: Principal, connector_id: str) -> ca.ResourceList:
        return self.resources.list_resources(principal, connector_id)

    def add_resource(self, principal: Principal, connector_id: str, body: dict[str, Any]) -> ca.ResourceView:
        return self.resources.add_resource(principal, connector_id, body)

    def delete_resource(self, principal: Principal, connector_id: str, resource_id: str) -> ca.ResourceDeleted:
        return self.resources.delete_resource(principal, connector_id, resource_id)

    # ---- syncing -------------------------------------------------------------------------------------
    def trigger_sync(self, principal: Principal, connector_id: str, *, full: bool = False) -> ca.SyncQueued:
        """Queue a sync now. `full`: every resource is also reconciled for deletions over everything synced
        from it, whatever its reconcile cadence (the request is kept on the connector until each resource
        has been reconciled, so it holds across chunks and restarts)."""
        self._ready()
        rec = self._connector(principal, connector_id)
        if rec.data.get("sync_blocked"):
            raise ApiError(
                ErrorCode.CONFLICT,
                f"the connector is sync_blocked ({rec.data.get('sync_blocked_reason') or 'credentials rejected'});"
                " update its credentials with PATCH first",
            )
        if not any(is_active(r.data) for r in self.store.resources(principal.org, connector_id)):
            raise ApiError(ErrorCode.CONFLICT, "the connector has no active resources; configure it first")
        requested = self._clock.now()
        if full:  # written before the job exists, so the chunk that picks it up sees the request
            self.store.update(principal.org, connector_id, lambda d: dict(d, full_sync_requested_at=requested))
        trigger = "full" if full else "manual"
        run_id = self.scheduling.enqueue(principal.org, connector_id, trigger)
        if run_id is None and not running(self._connector(principal, connector_id).data, self._clock.now()):
            run_id = self.scheduling.enqueue_once_released(principal.org, connector_id, trigger)
        if run_id is None:
            if full:  # refused: take back this request (unless a later one replaced it)
                self.store.update(
                    principal.org,
                    connector_id,
                    lambda d: (
                        dict(d, full_sync_requested_at=rec.data.get("full_sync_requested_at"))
                        if d.get("full_sync_requested_at") == requested
                        else None
                    ),
                )
            raise ApiError(ErrorCode.CONFLICT, "a sync of this connector is already queued or running")
        return {"run_id": run_id, "workflow_id": workflow_id(connector_id), "full": full}

    def run_job(self, job: Job) -> str:
        """The `connectors` queue handler: one chunk of one connector's sync."""
        if self.runner is None:
            return "unconfigured"
        p = job.payload
        return self.runner.run(
            job.org, str(p["connector_id"]), str(p.get("run_id") or job.lease_token), str(p.get("trigger") or "")
        )
