"""Connector rules with no I/O: the provider catalogue, item ids, field limits, and the `lifecycle` rule.

`lifecycle` is derived, never stored, from state fields that are themselves kept true (docs/connectors.md):
first match wins.

1. `reconnect`: `needs_reauth` (an OAuth refresh grant was refused) or `sync_blocked` (credentials or
   scopes rejected on a data call); only the caller can fix either.
2. `syncing`: a sync holds the connector's lease right now (`sync_status` is `running`).
3. `pending_setup`: no active resource: nothing would be synced.
4. `ingesting`: a resource still owes its first sync (or a first sync continues in chunks), or objects the
   last sync handed to ingestion are not indexed yet (some item still `queued`/`processing`).
5. `active`: caught up; the scheduler syncs again at `next_sync_at`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ctxstore.domain.errors import ApiError, ErrorCode

MAX_CUSTOM_INSTRUCTIONS = 4000  # characters (the spec's limit): longer is rejected, never truncated
DEFAULT_LOOKBACK_DAYS = 30
MAX_LOOKBACK_DAYS = 3650
MAX_ITEM_ID = 200  # well under the ingest id limit (512), so a provider's long ids never fail ingestion
RESOURCE_METADATA_CAP = 16 * 1024  # compact JSON bytes, as the reference caps a resource's metadata
RESOURCE_ADDITIONAL_METADATA_CAP = 1024  # the reference's cap for a resource's additional_metadata
SYNC_MODES = ("rescan", "new_only")


@dataclass(frozen=True)
class CatalogueEntry:
    provider: str
    category: str
    rank: int


# The five providers the interface names, in display order. `supported` in answers is whether this
# server has the provider's implementation registered.
CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry("slack", "chat", 1),
    CatalogueEntry("github", "code", 2),
    CatalogueEntry("linear", "issue_tracker", 3),
    CatalogueEntry("notion", "wiki", 4),
    CatalogueEntry("gmail", "mail", 5),
)
PROVIDER_IDS = tuple(e.provider for e in CATALOGUE)

_UNSAFE_ID = re.compile(r"[,\x00-\x1f\x7f]")


def connector_item_id(provider: str, account_scope: str, native_id: str) -> str:
    """The item id of a synced object: the same object of the same account always lands on the same item.

    Commas (the status route's separator) and control characters become `_`; when anything was replaced or
    the id would pass MAX_ITEM_ID, a hash of the exact original keeps distinct objects distinct.
    """
    raw = f"{provider}_{account_scope}_{native_id}" if account_scope else f"{provider}_{native_id}"
    clean = _UNSAFE_ID.sub("_", raw)
    if clean == raw and len(raw) <= MAX_ITEM_ID:
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:24]
    return f"{clean[: MAX_ITEM_ID - len(digest) - 1]}~{digest}"


def check_custom_instructions(value: object, field: str = "custom_instructions") -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{field}' must be a string")
    if len(value) > MAX_CUSTOM_INSTRUCTIONS:
        raise ApiError(
            ErrorCode.INVALID_PARAMETERS,
            f"'{field}' is {len(value)} characters; the limit is {MAX_CUSTOM_INSTRUCTIONS}",
        )
    return value


def resolve_interval(value: object, *, default_s: int, min_s: int, max_s: int) -> int:
    """sync_interval_seconds: 0 or None means the provider's default; outside [min, max] is a 400, never clamped."""
    if value is None or value == 0:
        return default_s
    if not isinstance(value, int) or isinstance(value, bool):
        raise ApiError(ErrorCode.INVALID_PARAMETERS, "'sync_interval_seconds' must be an integer")
    if value < min_s or value > max_s:
        raise ApiError(
            ErrorCode.INVALID_PARAMETERS,
            f"'sync_interval_seconds' must be between {min_s} and {max_s} for this provider (0 = the default,"
            f" {default_s}); got {value}",
        )
    return value


def check_lookback_days(value: object) -> int:
    if value is None:
        return DEFAULT_LOOKBACK_DAYS
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LOOKBACK_DAYS:
        raise ApiError(
            ErrorCode.INVALID_PARAMETERS, f"'lookback_days' must be an integer from 0 to {MAX_LOOKBACK_DAYS}"
        )
    return value


@dataclass(frozen=True)
class LifecycleInputs:
    needs_reauth: bool
    sync_blocked: bool
    running: bool
    active_resources: int
    pending_first_sync: int  # active resources whose first sync has not finished
    backlog: int  # active resources with a first sync continuing in chunks
    unindexed: bool  # objects the last sync dispatched that are not indexed yet


def lifecycle(s: LifecycleInputs) -> str:
    if s.needs_reauth or s.sync_blocked:
        return "reconnect"
    if s.running:
        return "syncing"
    if s.active_resources == 0:
        return "pending_setup"
    if s.pending_first_sync > 0 or s.backlog > 0 or s.unindexed:
        return "ingesting"
    return "active"


def reconcile_due(
    *,
    now: float,
    interval_s: float,
    last_reconciled_at: float | None,
    first_sync_completed_at: float | None,
    full_sync_requested_at: float | None,
) -> bool:
    """Whether a caught-up resource is reconciled for deletions in this cycle (docs/connectors.md).

    A requested full sync newer than the last reconcile always is. Otherwise at most once per `interval_s`
    (0: every cycle), counted from the last reconcile, or from the end of the first sync, whose listing has
    just seen everything that exists."""
    if full_sync_requested_at is not None and (
        last_reconciled_at is None or last_reconciled_at < full_sync_requested_at
    ):
        return True
    if interval_s <= 0:
        return True
    since = last_reconciled_at if last_reconciled_at is not None else first_sync_completed_at
    return since is None or now - since >= interval_s
