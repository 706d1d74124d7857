"""How `CtxstoreClient.wait_for` polls: the ids not done, oldest first.

Items are indexed about in the order they were queued, so one poll asks for the pending ids in that order, a
call of `per_call` ids at a time, and stops at the first call in which none is done (or `settled`): the later
ids are queued behind those. Waiting on 5,000 items then costs a few calls a second instead of 50 (on AWS, a
Lambda call and its reads each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxstore.client.models import ItemStatus


def poll_oldest_first(
    status: Callable[[Sequence[str]], list[ItemStatus]],
    pending: Sequence[str],
    seen: dict[str, ItemStatus],
    per_call: int,
    *,
    settled: Callable[[ItemStatus], bool] = lambda s: s.done,
) -> list[str]:
    """One poll of `pending`: record what `status` answers in `seen`; return the ids not `settled` (by default:
    not done), in order."""
    still: list[str] = []
    for start in range(0, len(pending), per_call):
        part = pending[start : start + per_call]
        current = status(part)
        seen.update((s.id, s) for s in current)
        left = [s.id for s in current if not settled(s)]
        still.extend(left)
        if len(left) == len(part):
            return still + list(pending[start + per_call :])
    return still
