"""The services' answers are typed (TypedDicts the HTTP layer renders): what they return has exactly the keys
their types declare, so the types and the JSON cannot drift apart."""

from __future__ import annotations

from typing import Any

from ctxstore.services.items.ingest import IngestAnswer, ItemResult
from ctxstore.services.items.status import ItemStatusView, StatusAnswer
from ctxstore.services.query.service import QueryAnswer, QueryPlan
from tests.unit.services.test_services_on_fakes import DB, World, notes, world  # noqa: F401 (the fixture)


def _keys(kind: Any) -> tuple[set[str], set[str]]:
    return set(kind.__required_keys__), set(kind.__optional_keys__)


def _fits(value: dict[str, Any], kind: Any) -> bool:
    required, optional = _keys(kind)
    return required <= set(value) <= required | optional


def test_the_ingest_answer_and_each_item_result_have_their_types_keys(world: World) -> None:  # noqa: F811
    who = world.principal()
    world.ready_database(who)
    answer = world.services.ingest.accept(who, notes(("a", "one"), ("b", "two")))
    assert set(answer) == _keys(IngestAnswer)[0]
    assert all(set(r) == _keys(ItemResult)[0] for r in answer["results"])


def test_status_views_of_known_and_unknown_ids_fit_their_type(world: World) -> None:  # noqa: F811
    who = world.principal()
    world.ready_database(who)
    world.services.ingest.accept(who, notes(("a", "one")))
    answer = world.services.status.lookup(who, DB, "", ["a", "nope"])
    assert set(answer) == _keys(StatusAnswer)[0]
    known, unknown = answer["statuses"]
    assert set(known) == _keys(ItemStatusView)[0] | _keys(ItemStatusView)[1]
    assert set(unknown) == _keys(ItemStatusView)[0]


def test_the_query_answer_fits_its_type(world: World) -> None:  # noqa: F811
    who = world.principal()
    world.ready_database(who)
    answer = world.services.query.query(who, {"database": DB, "query": "anything", "graph_context": False})
    assert _fits(dict(answer), QueryAnswer) and "graph_context" not in answer
    assert set(answer["query_plan"]) == _keys(QueryPlan)[0]
