"""Connector rules without I/O: item ids, limits, every value of the lifecycle rule, the reconcile cadence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxstore.domain.connector_rules import (
    MAX_ITEM_ID,
    LifecycleInputs,
    check_custom_instructions,
    check_lookback_days,
    connector_item_id,
    lifecycle,
    reconcile_due,
    resolve_interval,
)
from ctxstore.domain.errors import ApiError

IDLE = LifecycleInputs(
    needs_reauth=False,
    sync_blocked=False,
    running=False,
    active_resources=2,
    pending_first_sync=0,
    backlog=0,
    unindexed=False,
)


def test_item_ids_are_deterministic_comma_free_and_bounded() -> None:
    assert connector_item_id("slack", "T1", "C1_1700.01") == "slack_T1_C1_1700.01"
    assert connector_item_id("gmail", "", "m1") == "gmail_m1"
    odd = connector_item_id("github", "acme", "acme/repo#1,2")
    assert "," not in odd and odd != connector_item_id("github", "acme", "acme/repo#1_2")
    long_a = connector_item_id("notion", "ws", "x" * 600 + "a")
    long_b = connector_item_id("notion", "ws", "x" * 600 + "b")
    assert (
        len(long_a) <= MAX_ITEM_ID and long_a != long_b and long_a == connector_item_id("notion", "ws", "x" * 600 + "a")
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, "active"),
        ({"needs_reauth": True, "running": True}, "reconnect"),
        ({"sync_blocked": True, "active_resources": 0}, "reconnect"),
        ({"running": True, "pending_first_sync": 1}, "syncing"),
        ({"active_resources": 0}, "pending_setup"),
        ({"pending_first_sync": 1}, "ingesting"),
        ({"backlog": 1}, "ingesting"),
        ({"unindexed": True}, "ingesting"),
    ],
)
def test_lifecycle_first_match_wins(change: dict[str, object], expected: str) -> None:
    assert lifecycle(replace(IDLE, **change)) == expected  # type: ignore[arg-type]


def test_limits() -> None:
    assert check_custom_instructions("x" * 4000) == "x" * 4000
    with pytest.raises(ApiError, match="4001 characters"):
        check_custom_instructions("x" * 4001)
    assert resolve_interval(0, default_s=3600, min_s=300, max_s=604800) == 3600
    assert resolve_interval(None, default_s=3600, min_s=300, max_s=604800) == 3600
    assert resolve_interval(300, default_s=3600, min_s=300, max_s=604800) == 300
    for bad in (299, 604801, True, "60"):
        with pytest.raises(ApiError, match="sync_interval_seconds"):
            resolve_interval(bad, default_s=3600, min_s=300, max_s=604800)
    assert check_lookback_days(None) == 30 and check_lookback_days(0) == 0
    with pytest.raises(ApiError):
        check_lookback_days(-1)


@pytest.mark.parametrize(
    ("now", "interval", "last", "first_done", "requested", "due"),
    [
        (1000.0, 0, 999.0, 10.0, None, True),  # interval 0 (Slack): every cycle
        (1000.0, 600, None, 500.0, None, False),  # counted from the end of the first sync, whose listing is fresh
        (1100.0, 600, None, 500.0, None, True),
        (1000.0, 600, 700.0, 10.0, None, False),  # at most once per interval
        (1300.0, 600, 700.0, 10.0, None, True),
        (1000.0, 600, 700.0, 10.0, 900.0, True),  # a full sync requested after the last reconcile
        (1000.0, 600, 950.0, 10.0, 900.0, False),  # ...which has been served since
        (1000.0, 600, None, None, None, True),  # nothing to count from
    ],
)
def test_reconcile_cadence(
    now: float, interval: int, last: float | None, first_done: float | None, requested: float | None, due: bool
) -> None:
    assert (
        reconcile_due(
            now=now,
            interval_s=interval,
            last_reconciled_at=last,
            first_sync_completed_at=first_done,
            full_sync_requested_at=requested,
        )
        is due
    )
