"""Which answered items' graphs the graph context reads (services/query/live_top.may_relate)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore.domain.items import item_record
from ctxstore.services.query.live_top import may_relate


@pytest.mark.parametrize(
    ("fields", "read"),
    [
        ({"status": "completed", "relations_created": 0}, False),  # finished, no relation: nothing to find
        ({"status": "completed", "relations_created": 2}, True),
        ({"status": "completed"}, True),  # completed before the count was kept: unknown
        ({"status": "graph_creation", "relations_created": 0}, True),  # a new version's graph step still running
        ({"status": "queued"}, True),
    ],
)
def test_only_a_finished_item_without_relations_is_skipped(fields: dict[str, Any], read: bool) -> None:
    assert may_relate(item_record({"id": "i", "version": "v", **fields})) is read


def test_an_unknown_record_may_relate() -> None:
    assert may_relate(None) is True
