"""One sync chunk of one connector: resources in turn from their stored checkpoints, within a budget.

A chunk takes the connector's lease, opens (and if due rotates) its credentials, then runs each active
resource (least recently synced first) through its provider: objects are staged, and at every provider
checkpoint the staged objects are ingested, deletions applied, the index written and the checkpoint stored,
in that order, so a chunk interrupted anywhere (kill -9 included) resumes from the last stored checkpoint
and nothing is lost or ingested twice. A chunk stops at the first checkpoint past `chunk_objects` objects
or `chunk_seconds`; the rest continues in the next chunk, scheduled `continue_after_s` later. A resource
that is caught up is reconciled for deletions on its provider's cadence (connector_rules.reconcile_due),
over the whole resource after an explicit full sync request. Provider errors become connector state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.connector_rules import DEFAULT_LOOKBACK_DAYS, reconcile_due
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.clock import Clock
from ctxstore.ports.connector_provider import (
    Checkpoint,
    ConnectorProvider,
    CredentialsRejected,
    DeletedObject,
    KnownObject,
    ObjectFailure,
    ProviderContext,
    RateLimited,
    RefreshRejected,
    ResourceUnavailable,
    SyncedObject,
    SyncRequest,
    TokenExpired,
    TransientProviderError,
)
from ctxstore.services.connectors.credentials import ConnectorAuth
from ctxstore.services.connectors.dispatch import Batch, Dispatcher, Target, TargetUnavailable
from ctxstore.services.connectors.store import ConnectorStore
from ctxstore.services.connectors.views import ERROR, IDLE, RUNNING, first_sync_done, is_active, running
from ctxstore.services.items.locks import BOOT_ID

log = logging.getLogger("ctxstore.connectors")
MAX_FAILURES_KEPT = 10
MAX_LAST_DISPATCHED = 20
RECONCILE_SAFETY_MIN = 20  # with at least this many known objects in the window...
RECONCILE_SAFETY_SHARE = 0.5  # ...a listing that would delete more than this share is distrusted
TRANSIENT_BACKOFF_S = 60.0


@dataclass(frozen=True)
class SyncLimits:
    chunk_objects: int = 2000
    chunk_seconds: float = 60.0
    continue_after_s: float = 1.0
    lease_s: float = 600.0
    single_process: bool = False  # locally a lease left by an earlier process is stale at once
    reconcile_interval_s: int | None = None  # replaces every provider's reconcile cadence when set


class ConnectorGone(Exception):
    """The connector was deleted while its sync ran: stop without writing more."""


@dataclass
class Outcome:
    run_id: str
    trigger: str
    started_at: float
    objects: int = 0
    dispatched: int = 0
    unchanged: int = 0
    deleted: int = 0
    failures: int = 0
    more: bool = False  # the budget ran out with work left
    error: str = ""
    blocked: str = ""
    retry_after_s: float | None = None
    resources: int = 0
    dispatched_ids: list[dict[str, str]] = field(default_factory=list)


class SyncRunner:
    def __init__(
        self,
        store: ConnectorStore,
        auth: ConnectorAuth,
        dispatcher: Dispatcher,
        providers: dict[str, ConnectorProvider],
        clock: Clock,
        limits: SyncLimits,
        reschedule: Callable[[str, dict[str, Any]], None],  # mirrors next_sync_at into the scheduler
        stopping: Callable[[], bool] = lambda: False,  # the server is shutting down: end at the next checkpoint
    ) -> None:
        self._store = store
        self._auth = auth
        self._dispatch = dispatcher
        self._providers = providers
        self._clock = clock
        self._limits = limits
        self._reschedule = reschedule
        self._stopping = stopping

    def _spent(self, out: Outcome, deadline: float) -> bool:
        return out.objects >= self._limits.chunk_objects or time.monotonic() >= deadline or self._stopping()

    # ---- entry ------------------------------------------------------------------------------------
    def run(self, org: str, connector_id: str, run_id: str, trigger: str) -> str:
        rec = self._store.get(org, connector_id)
        if rec is None:
            return "gone"
        provider = self._providers.get(str(rec.data["provider"]))
        if provider is None:
            return "unsupported"
        if rec.data.get("sync_blocked"):
            return "blocked"  # the scheduler skips it; only a credential or config update clears it
        started = self._clock.now()
        if not self._take_lease(org, connector_id, run_id, started):
            return "busy"
        outcome = Outcome(run_id, trigger, started)
        try:
            self._run(org, connector_id, provider, outcome)
        except ConnectorGone:
            return "gone"
        except RateLimited as exc:
            outcome.error, outcome.retry_after_s = str(exc), exc.retry_after_s
        except (RefreshRejected, TransientProviderError) as exc:  # needs_reauth is set where the refresh failed
            outcome.error = str(exc)
        except (CredentialsRejected, TokenExpired) as exc:
            outcome.blocked = str(exc)
        except StoreUnavailable as exc:
            outcome.error = f"storage temporarily unavailable: {exc}"
        except Exception:
            log.exception("connector %s: sync failed", connector_id)
            outcome.error = "internal error during the sync (see the server log)"
        self._finish(org, connector_id, outcome)
        return "blocked" if outcome.blocked else "error" if outcome.error else "more" if outcome.more else "done"

    def _run(self, org: str, connector_id: str, provider: ConnectorProvider, out: Outcome) -> None:
        rec = self._require(org, connector_id)
        ctx = self._auth.context(org, rec.data, provider)
        resources = [r.data for r in self._store.resources(org, connector_id) if is_active(r.data)]
        resources.sort(key=lambda r: (r.get("last_synced_at") or 0.0, r["resource_id"]))
        out.resources = len(resources)
        deadline = time.monotonic() + self._limits.chunk_seconds
        for resource in resources:
            if self._spent(out, deadline):
                out.more = True
                return
            self._resource(org, rec.data, provider, ctx, resource, out, deadline)
            if out.more:
                return

    # ---- one resource -----------------------------------------------------------------------------
    def _resource(
        self,
        org: str,
        connector: dict[str, Any],
        provider: ConnectorProvider,
        ctx: ProviderContext,
        resource: dict[str, Any],
        out: Outcome,
        deadline: float,
    ) -> None:
        connector_id, resource_id = str(connector["connector_id"]), str(resource["resource_id"])
        now = self._clock.now()
        start = resource.get("first_sync_start")
        if start is None:  # fixed at the first chunk, so every chunk of a first sync covers the same range
            start = now - int(resource.get("lookback_days", DEFAULT_LOOKBACK_DAYS)) * 86400
            self._store.update_resource(org, connector_id, resource_id, lambda d: dict(d, first_sync_start=start))
        target = self._target(org, connector, resource)
        refreshed = False
        while True:
            current = self._store.resource(org, connector_id, resource_id)
            if current is None or not is_active(current.data):
                return
            request = SyncRequest(
                resource_id=resource_id,
                resource_type=str(resource.get("resource_type") or ""),
                checkpoint=current.data.get("checkpoint"),
                start=float(start),
                sync_mode="new_only" if resource.get("sync_mode") == "new_only" else "rescan",
                resource_metadata=dict(resource.get("provider_metadata") or {}),
            )
            try:
                caught_up = self._consume(org, provider, ctx, target, request, out, deadline)
                if caught_up:
                    self._reconcile(org, provider, ctx, target, request, out, connector)
                return
            except TokenExpired as exc:
                if ctx.auth_type != "oauth" or refreshed:
                    raise CredentialsRejected(f"the provider refused the access token: {exc}") from exc
                self._auth.refresh(org, connector, provider, ctx)
                refreshed = True
            except (ResourceUnavailable, TargetUnavailable) as exc:
                self._resource_error(org, connector_id, resource_id, str(exc))
                return

    def _consume(
        self,
        org: str,
        provider: ConnectorProvider,
        ctx: ProviderContext,
        t: Target,
        request: SyncRequest,
        out: Outcome,
        deadline: float,
    ) -> bool:
        """Run the provider's stream; True when the resource is caught up (its last checkpoint has no more)."""
        batch = Batch()
        deletions: list[str] = []
        failures: list[str] = []
        last: Checkpoint | None = None
        events = provider.sync(ctx, request)
        try:
            for event in events:
                if isinstance(event, SyncedObject):
                    out.objects += 1
                    problem = self._dispatch.stage(t, event, batch, self._clock.now())
                    if problem:
                        failures.append(f"{event.native_id}: {problem}")
                elif isinstance(event, DeletedObject):
                    deletions.append(event.native_id)
                elif isinstance(event, ObjectFailure):
                    failures.append(f"{event.native_id or '?'}: {event.message}")
                elif isinstance(event, Checkpoint):
                    self._commit(org, t, batch, deletions, failures, event, out)
                    deletions, failures, last = [], [], event
                    if event.has_more and self._spent(out, deadline):
                        out.more = True
                        return False
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        if batch.staged or deletions or failures or batch.unchanged:
            log.warning("connector %s: provider stream ended without a final checkpoint", t.connector_id)
            self._commit(org, t, batch, deletions, failures, None, out)
        return last is not None and not last.has_more

    def _commit(
        self,
        org: str,
        t: Target,
        batch: Batch,
        deletions: list[str],
        failures: list[str],
        cp: Checkpoint | None,
        out: Outcome,
    ) -> None:
        """Everything before a checkpoint, made durable in crash-safe order: items, index, deletions, checkpoint."""
        unchanged, batch.unchanged = batch.unchanged, 0
        flushed = self._dispatch.flush(t, batch)
        failures = failures + [f"{n}: {m}" for n, m in flushed.failures]
        deleted = self._dispatch.delete(t, deletions) if deletions else 0
        now = self._clock.now()
        out.dispatched += len(flushed.dispatched)
        out.unchanged += unchanged
        out.deleted += deleted
        out.failures += len(failures)
        for failure in failures:
            log.info("connector %s resource %s: object failed: %s", t.connector_id, t.resource_id, failure[:300])
        refs = [{"database": t.database, "collection": t.collection, "id": i} for i in flushed.dispatched]
        out.dispatched_ids = (out.dispatched_ids + refs)[-MAX_LAST_DISPATCHED:]

        def save(d: dict[str, Any]) -> dict[str, Any]:
            d = dict(
                d,
                last_synced_at=now,
                objects_synced=int(d.get("objects_synced") or 0) + len(flushed.dispatched),
                objects_deleted=int(d.get("objects_deleted") or 0) + deleted,
                failures=(list(d.get("failures") or []) + failures)[-MAX_FAILURES_KEPT:],
                last_error="",
                last_status="ok",
            )
            if cp is not None:
                d.update(checkpoint=cp.state, provider_cursor=cp.cursor, has_more=cp.has_more)
                if cp.has_more:
                    d["backfill_next_chunk_at"] = None
                elif d.get("first_sync_completed_at") is None:
                    d["first_sync_completed_at"] = now
            return d

        if self._store.update_resource(org, t.connector_id, t.resource_id, save) is None:
            raise ResourceUnavailable("the resource was removed from the connector during the sync")
        self._heartbeat(org, t.connector_id, out, len(flushed.dispatched), now)

    def _reconcile(
        self,
        org: str,
        provider: ConnectorProvider,
        ctx: ProviderContext,
        t: Target,
        request: SyncRequest,
        out: Outcome,
        connector: dict[str, Any],
    ) -> None:
        """When due, delete the items of known objects the provider no longer has: within its reconcile window
        on its cadence, over the whole resource after a full sync request."""
        now = self._clock.now()
        current = self._store.resource(org, t.connector_id, t.resource_id)
        if current is None:
            return
        r = current.data
        requested = _epoch_or_none(connector.get("full_sync_requested_at"))
        last = _epoch_or_none(r.get("last_reconciled_at"))
        cadence = self._limits.reconcile_interval_s
        if not reconcile_due(
            now=now,
            interval_s=provider.info.reconcile_interval_s if cadence is None else cadence,
            last_reconciled_at=last,
            first_sync_completed_at=_epoch_or_none(r.get("first_sync_completed_at")),
            full_sync_requested_at=requested,
        ):
            return
        full = requested is not None and (last is None or last < requested)
        window = provider.info.reconcile_window_s
        since = None if full or window is None else now - window
        request = replace(request, checkpoint=r.get("checkpoint"))
        known = [
            KnownObject(o.sk, o.data.get("thread"), o.data.get("created_at"))
            for o in self._store.objects(org, t.connector_id, t.resource_id)
            if since is None or float(o.data.get("created_at") or 0) >= since
        ]
        present = provider.reconcile(ctx, request, since=since, known=known)
        if present is None:
            return
        alive = set(present)
        missing = [k.native_id for k in known if k.native_id not in alive]
        deleted = 0
        if len(known) >= RECONCILE_SAFETY_MIN and len(missing) > RECONCILE_SAFETY_SHARE * len(known):
            # Noted as done all the same: the next listing is due on the cadence, not at once.
            log.warning(
                "connector %s resource %s: reconcile would delete %d of %d objects; skipped as implausible",
                t.connector_id,
                t.resource_id,
                len(missing),
                len(known),
            )
        elif missing:
            deleted = self._dispatch.delete(t, missing)
        out.deleted += deleted

        def note(d: dict[str, Any]) -> dict[str, Any]:
            return dict(d, last_reconciled_at=now, objects_deleted=int(d.get("objects_deleted") or 0) + deleted)

        self._store.update_resource(org, t.connector_id, t.resource_id, note)

    # ---- state ------------------------------------------------------------------------------------
    def _target(self, org: str, connector: dict[str, Any], resource: dict[str, Any]) -> Target:
        account = connector.get("account") or {}
        instructions = resource.get("custom_instructions")
        if instructions is None:  # a resource value replaces the connector's; "" clears it
            instructions = connector.get("custom_instructions") or ""
        return Target(
            org=org,
            connector_id=str(connector["connector_id"]),
            provider=str(connector["provider"]),
            account_scope=str(connector.get("provider_account_scope") or ""),
            account_details=dict(account.get("details") or {}),
            resource_id=str(resource["resource_id"]),
            resource_name=str(resource.get("name") or ""),
            database=str(resource.get("database_override") or connector["database"]),
            collection=str(resource.get("collection_override") or connector.get("collection") or ""),
            metadata=dict(resource.get("metadata") or {}),
            additional_metadata=dict(resource.get("additional_metadata") or {}),
            custom_instructions=str(instructions),
            sync_mode=str(resource.get("sync_mode") or "rescan"),
        )

    def _require(self, org: str, connector_id: str) -> Any:
        rec = self._store.get(org, connector_id)
        if rec is None:
            raise ConnectorGone(connector_id)
        return rec

    def _take_lease(self, org: str, connector_id: str, run_id: str, now: float) -> bool:
        taken = {"ok": False}

        def take(d: dict[str, Any]) -> dict[str, Any] | None:
            if running(d, now) and d.get("run_id") != run_id:
                stale = self._limits.single_process and d.get("lease_boot") != BOOT_ID
                if not stale:
                    return None  # another worker is syncing this connector right now
            taken["ok"] = True
            return dict(
                d,
                sync_status=RUNNING,
                lease_until=now + self._limits.lease_s,
                lease_boot=BOOT_ID,
                run_id=run_id,
                run_started_at=now,
                last_attempted_sync_at=now,
                cycle_started_at=d.get("cycle_started_at") or now,
            )

        self._store.update(org, connector_id, take)
        return taken["ok"]

    def _heartbeat(self, org: str, connector_id: str, out: Outcome, dispatched: int, now: float) -> None:
        def beat(d: dict[str, Any]) -> dict[str, Any]:
            d = dict(d, lease_until=now + self._limits.lease_s)
            if dispatched:
                d["documents_dispatched"] = int(d.get("documents_dispatched") or 0) + dispatched
                d["first_data_dispatched_at"] = d.get("first_data_dispatched_at") or now
                d["last_dispatched"] = out.dispatched_ids
                d["last_dispatch_at"] = now
            return d

        if self._store.update(org, connector_id, beat) is None:
            raise ConnectorGone(connector_id)

    def _resource_error(self, org: str, connector_id: str, resource_id: str, message: str) -> None:
        log.warning("connector %s resource %s: %s", connector_id, resource_id, message)

        def mark(d: dict[str, Any]) -> dict[str, Any]:
            return dict(d, last_error=message, last_status=ERROR, last_synced_at=self._clock.now())

        self._store.update_resource(org, connector_id, resource_id, mark)

    def _finish(self, org: str, connector_id: str, out: Outcome) -> None:
        now = self._clock.now()
        resources = [r.data for r in self._store.resources(org, connector_id) if is_active(r.data)]
        backlog = [r for r in resources if r.get("has_more") and r.get("last_status") != ERROR]
        pending = [r for r in resources if not first_sync_done(r) and r.get("last_status") != ERROR]
        more = (out.more or bool(backlog) or bool(pending)) and not (out.error or out.blocked)

        def done(d: dict[str, Any]) -> dict[str, Any] | None:
            if d.get("run_id") != out.run_id:
                return None  # another run took over (our lease had run out): its state wins
            interval = int(d["sync_interval_seconds"])
            d = dict(d, sync_status=IDLE, lease_until=None, updated_at=now)
            d["last_run"] = {
                "run_id": out.run_id,
                "trigger": out.trigger,
                "started_at": iso(out.started_at),
                "finished_at": iso(now),
                "objects_seen": out.objects,
                "objects_dispatched": out.dispatched,
                "objects_unchanged": out.unchanged,
                "objects_deleted": out.deleted,
                "object_failures": out.failures,
                "outcome": "blocked" if out.blocked else "error" if out.error else "continuing" if more else "done",
            }
            if out.blocked:
                d.update(
                    sync_blocked=True,
                    sync_blocked_at=iso(now),
                    sync_blocked_reason=out.blocked,
                    last_error=out.blocked,
                    next_sync_at=None,
                )
                return d
            if out.error:
                failures = int(d.get("consecutive_failures") or 0) + 1
                if out.retry_after_s is not None:
                    wait = out.retry_after_s
                else:
                    wait = min(float(interval), TRANSIENT_BACKOFF_S * 2 ** (failures - 1))
                d.update(last_error=out.error, consecutive_failures=failures, next_sync_at=now + wait)
                return d
            if more:
                delays = [float(r.get("backfill_chunk_interval_seconds") or 0) for r in backlog]
                d["next_sync_at"] = now + max(self._limits.continue_after_s, min(delays, default=0.0))
                return d
            if out.resources:
                d["sync_cycles_completed"] = int(d.get("sync_cycles_completed") or 0) + 1
                d["last_successful_sync_at"] = now
                d["first_sync_at"] = d.get("first_sync_at") or now
            anchor = float(d.get("cycle_started_at") or out.started_at)
            d.update(
                last_error="",
                consecutive_failures=0,
                cycle_started_at=None,
                next_sync_at=max(now + 1.0, anchor + interval),
            )
            return d

        rec = self._store.update(org, connector_id, done)
        if rec is not None and rec.data.get("run_id") == out.run_id:
            if more:
                self._mark_backfill_next(org, connector_id, backlog, rec.data.get("next_sync_at"))
            self._reschedule(org, rec.data)

    def _mark_backfill_next(self, org: str, connector_id: str, backlog: list[dict[str, Any]], at: object) -> None:
        for r in backlog:
            self._store.update_resource(
                org, connector_id, str(r["resource_id"]), lambda d: dict(d, backfill_next_chunk_at=at)
            )


def _epoch_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
