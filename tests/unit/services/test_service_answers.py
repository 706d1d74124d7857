"""The services' answers are typed (TypedDicts the HTTP layer renders): what they return has exactly the keys
their types declare, so the types and the JSON cannot drift apart."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxstore.domain.ingest_request import Upload, parse_ingest
from ctxstore.ports.search_index import ChunkDoc
from ctxstore.services.access.principal import Principal
from ctxstore.services.items.catalog_answers import (
    AppRow,
    ChunkRow,
    DeleteResult,
    FileRow,
    ItemChunksAnswer,
    ItemDeleteAnswer,
    ItemInspectAnswer,
    ItemListAnswer,
    ItemMetadataAnswer,
    MemoryRow,
    Pagination,
)
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


# ---- the item catalog: list, inspect, chunks, delete, metadata ------------------------------------------------
def _stock(world: World) -> Principal:  # noqa: F811
    """A file, an app item (`a`, `b` from notes) and a memory, each stored the way ingest stores it."""
    who = world.principal()
    world.ready_database(who)
    file = parse_ingest(
        store_raw=None,
        database=DB,
        collection="",
        upsert_raw=None,
        uploads=[Upload("report.txt", "text/plain", b"hello there")],
        document_metadata=json.dumps([{"id": "f"}]),
        app_knowledge=None,
        memories=None,
        graph_payload=None,
        classify=lambda name, content_type: "txt",
    )
    memory = parse_ingest(
        store_raw="memory",
        database=DB,
        collection="",
        upsert_raw=None,
        uploads=[],
        document_metadata=None,
        app_knowledge=None,
        memories=json.dumps([{"id": "m", "text": "likes tea", "infer": True}]),
        graph_payload=None,
        classify=None,
    )
    for req in (file, notes(("a", "one"), ("b", "two")), memory):
        world.services.ingest.accept(who, req)
    return who


def _chunk(item_id: str, position: int) -> ChunkDoc:
    return ChunkDoc(f"{item_id}#{position}", item_id, DB, "", "knowledge", f"part {position}", None, position=position)


ROW_TYPES: dict[str, Any] = {"file": FileRow, "app": AppRow, "memory": MemoryRow}


def test_a_listing_and_each_kind_of_row_have_their_types_keys(world: World) -> None:  # noqa: F811
    who = _stock(world)
    catalog = world.services.catalog
    rows = []
    for store in ("knowledge", "memory"):
        answer = catalog.list_items(who, DB, "", store, page=1, page_size=10, ids=None, filters={}, include_fields=None)
        assert set(answer) == _keys(ItemListAnswer)[0]
        assert set(answer["pagination"]) == _keys(Pagination)[0]
        rows += answer["sources"]
    assert sorted(str(r["type"]) for r in rows) == ["app", "app", "file", "memory"]
    for row in rows:
        assert set(row) == _keys(ROW_TYPES[str(row["type"])])[0], row["type"]
        assert _keys(ROW_TYPES[str(row["type"])])[1] == set()


def test_a_row_cut_to_include_fields_holds_only_keys_of_its_kind_of_row(world: World) -> None:  # noqa: F811
    who = _stock(world)
    answer = world.services.catalog.list_items(
        who, DB, "", "knowledge", page=1, page_size=10, ids=["f"], filters={}, include_fields=["filename", "title"]
    )
    (row,) = answer["sources"]
    assert set(row) == {"id", "database", "collection", "tenant_id", "sub_tenant_id", "filename", "title"}
    assert set(row) <= _keys(FileRow)[0]


@pytest.mark.parametrize(
    ("mode", "extra"),
    [
        ("content", {"content", "inferred_content"}),
        ("url", {"presigned_url", "expires_in"}),
        ("both", {"content", "inferred_content", "presigned_url", "expires_in"}),
    ],
)
def test_inspect_answers_have_the_keys_of_their_mode(world: World, mode: str, extra: set[str]) -> None:  # noqa: F811
    who = _stock(world)
    for item_id in ("f", "a", "m"):
        answer = world.services.catalog.inspect(
            who, DB, "", item_id, mode=mode, expiry_seconds=60, url_for=lambda *_: "https://blobs.example/x"
        )
        required, optional = _keys(ItemInspectAnswer)
        assert set(answer) == required | extra and extra <= optional, (mode, item_id)
    assert required.isdisjoint(optional) and optional == {"content", "inferred_content", "presigned_url", "expires_in"}


def test_a_page_of_chunks_and_each_chunk_have_their_types_keys(world: World) -> None:  # noqa: F811
    who = _stock(world)
    world.index.upsert(who.org, [_chunk("a", 0), _chunk("a", 1)])
    answer = world.services.catalog.chunks(who, DB, "", "a", None, offset=0, limit=1)
    assert set(answer) == _keys(ItemChunksAnswer)[0]
    assert answer["total"] == 2 and answer["next_offset"] == 1
    (chunk,) = answer["chunks"]
    assert set(chunk) == _keys(ChunkRow)[0]


def test_a_delete_answer_and_each_result_have_their_types_keys(world: World) -> None:  # noqa: F811
    who = _stock(world)
    answer = world.services.catalog.delete(who, DB, "", "knowledge", ["a", "nope"])
    assert set(answer) == _keys(ItemDeleteAnswer)[0]
    assert [r["deleted"] for r in answer["results"]] == [True, False]
    assert all(set(r) == _keys(DeleteResult)[0] for r in answer["results"])


def test_a_metadata_update_answer_has_its_types_keys(world: World) -> None:  # noqa: F811
    who = _stock(world)
    world.index.upsert(who.org, [_chunk("a", 0)])
    answer = world.services.catalog.update_metadata(who, DB, "", "a", None, {"team": "blue"})
    assert set(answer) == _keys(ItemMetadataAnswer)[0]
    assert answer["additional_metadata_keys"] == ["team"] and answer["vector_rows_synced"] == 1
