"""The services' answers are typed (TypedDicts the HTTP layer renders): what they return has exactly the keys
their types declare, so the types and the JSON cannot drift apart. Items, status, query and databases run on the
port fakes; graphs, BYOG, webhooks and connectors on the SQLite stack (FalkorDB, a fake Slack API)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from ctxstore.domain.ingest_request import Upload, parse_ingest
from ctxstore.pipeline.jobs import connector_spec
from ctxstore.pipeline.local_runner import LocalRunner
from ctxstore.ports.records import Put
from ctxstore.ports.search_index import ChunkDoc
from ctxstore.retrieval.graph_context import GraphContext, PathGroup
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.byog.answers import (
    ByogCollectionDeleted,
    ByogCollections,
    ByogDatabaseCreated,
    ByogDatabaseDeleted,
)
from ctxstore.services.connectors.answers import (
    Catalogue,
    CatalogueEntry,
    Configured,
    ConnectorDeleted,
    ConnectorUpdated,
    ConnectorView,
    DiscoveredResource,
    DiscoverPageView,
    ProviderView,
    ResourceDeleted,
    ResourceFilters,
    ResourceList,
    ResourceView,
    SyncQueued,
)
from ctxstore.services.databases import (
    CollectionDeleteAnswer,
    CollectionListAnswer,
    DatabaseCreateAnswer,
    DatabaseDeleteAnswer,
    DatabaseListAnswer,
    DatabaseStatsAnswer,
    DatabaseStatusAnswer,
    FailedDatabase,
    Infra,
    RowCount,
    SchemaUpdateAnswer,
    VectorstoreStatus,
    collection_or_default,
)
from ctxstore.services.feedback import FeedbackAnswer, FeedbackRecord
from ctxstore.services.graphs.answers import RelationsAnswer, SubgraphAnswer
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
from ctxstore.services.items.uploads import UploadGrant
from ctxstore.services.query.service import QueryAnswer, QueryPlan
from ctxstore.services.webhooks.answers import (
    DeliveryPage,
    DeliveryView,
    RetryQueued,
    SecretSet,
    WebhookDeleted,
    WebhookState,
    WebhookTestResult,
    WebhookView,
)
from tests.fakes.slack_api import FakeSlack
from tests.support.app import LocalApp, make_app
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


def test_an_upload_grant_has_its_types_keys(world: World) -> None:  # noqa: F811
    grant = world.services.ingest.uploads.create(world.principal(), {"filename": "a.pdf", "size_bytes": 10})
    assert set(grant) == _keys(UploadGrant)[0]


def test_feedback_answers_and_records_have_their_types_keys(world: World) -> None:  # noqa: F811
    who = world.principal()
    world.ready_database(who)
    answer = world.services.feedback.submit(who, {"request_id": str(uuid.uuid4()), "feedback": "good", "database": DB})
    assert set(answer) == _keys(FeedbackAnswer)[0]
    world.services.feedback.submit(
        who, {"request_id": str(uuid.uuid4()), "ground_truth": {"answer": "x"}, "rating": "negative"}
    )
    records = world.services.feedback.recorded(who)
    assert len(records) == 2 and all(set(r) == _keys(FeedbackRecord)[0] for r in records)


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


def _exact(value: Mapping[str, Any], kind: Any) -> bool:
    """The answer has every key its type requires, no key it does not declare (optional ones may be absent)."""
    return _fits(dict(value), kind)


# ---- databases (on the port fakes) ----------------------------------------------------------------------------
def test_every_database_answer_fits_its_type(world: World) -> None:  # noqa: F811
    dbs = world.services.databases
    who = world.principal()
    world.ready_database(who)
    assert _exact(dbs.create(who, "other", None, "metadata_schema"), DatabaseCreateAnswer)
    status = dbs.status(who, DB)
    assert _exact(status, DatabaseStatusAnswer) and _exact(status["infra"], Infra)
    assert _exact(status["infra"]["vectorstore_status"], VectorstoreStatus)
    assert _exact(dbs.list(who), DatabaseListAnswer)
    world.services.ingest.accept(who, notes(("a", "one")))
    assert _exact(dbs.list_collections(who, DB), CollectionListAnswer)
    stats = dbs.stats(who, DB)
    assert _exact(stats, DatabaseStatsAnswer) and _exact(stats["knowledge_collection"], RowCount)
    added = dbs.update_schema(who, DB, [{"name": "team", "data_type": "VARCHAR"}])
    assert _exact(added, SchemaUpdateAnswer)
    assert _exact(dbs.delete_collection(who, DB, "default"), CollectionDeleteAnswer)
    assert _exact(dbs.delete(who, DB), DatabaseDeleteAnswer)


def test_a_failed_database_is_listed_with_its_types_keys(world: World) -> None:  # noqa: F811
    who = world.principal()
    records = world.services.container.records
    records.put(who.org, Put(rk.DATABASE, "", "broken", {"database": "broken", "status": "failed", "error": "x"}))
    [failed] = world.services.databases.list(who)["failed_databases"]
    assert _exact(failed, FailedDatabase)


# ---- graphs, BYOG, webhooks and connectors (on the SQLite stack) ----------------------------------------------
@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack) -> Iterator[LocalApp]:
    la = make_app(
        tmp_path_factory.mktemp("answers") / "data",
        allow_private_webhooks=True,
        connector_base_url_slack=slack.base_url,
        connector_token_url_slack=slack.base_url,
    )
    la.create_ready_database(DB)
    yield la
    la.close()


def _who(la: LocalApp) -> Principal:
    return la.services.keys.authenticate(la.key)


def test_the_graph_answers_fit_their_types(local: LocalApp) -> None:
    items = [
        {"id": "root", "title": "Root", "type": "message", "thread_id": "t1", "content": {"text": "Ada Lovelace."}},
        {"id": "a", "relates_to": [{"id": "root", "relation": "reply_to"}], "content": {"text": "Charles Babbage."}},
        {"id": "b", "parent_id": "root", "content": {"text": "The Analytical Engine."}},
    ]
    form = {"database": DB, "app_knowledge": json.dumps(items)}
    assert local.client.post("/context/ingest", data=form, headers=local.headers()).status_code == 202
    local.drain()
    graphs, who, col = local.services.graphs, _who(local), collection_or_default(None)
    assert graphs is not None
    for item_id in (None, "root"):
        rel = graphs.relations(
            who, DB, col, "knowledge", item_id=item_id, limit_raw=None, cursor_raw=None, principals=None
        )
        assert _exact(rel, RelationsAnswer)
    sub = graphs.subgraph(who, DB, col, "knowledge", "root", depth_raw=None, max_sources_raw=None, principals=None)
    assert _exact(sub, SubgraphAnswer) and len(sub["sources"]) == 3
    unknown = graphs.subgraph(who, DB, col, "knowledge", "nope", depth_raw=None, max_sources_raw=None, principals=None)
    assert _exact(unknown, SubgraphAnswer)


def test_the_graph_context_of_a_query_fits_its_types(local: LocalApp) -> None:
    text = "Ada Lovelace works at the Analytical Society. Charles Babbage founded the Analytical Society."
    form = {"database": DB, "app_knowledge": json.dumps([{"id": "gc", "title": "Society", "content": {"text": text}}])}
    assert local.client.post("/context/ingest", data=form, headers=local.headers()).status_code == 202
    local.drain()
    body = {"database": DB, "query": "Who founded the Analytical Society?", "graph_context": True, "mode": "fast"}
    answer = local.services.query.query(_who(local), body)
    gc = answer["graph_context"]
    assert set(gc) == _keys(GraphContext)[0]
    groups = gc["chunk_relations"] + gc["query_paths"]
    assert groups and all(set(g) == _keys(PathGroup)[0] for g in groups)


def test_the_byog_database_and_collection_answers_fit_their_types(local: LocalApp) -> None:
    byog, who = local.services.byog, _who(local)
    assert byog is not None
    assert _exact(byog.create_database(who, "g1"), ByogDatabaseCreated)
    byog.query(who, "g1", "people", "CREATE (:Person {name: 'Ada'})", None)
    listed = byog.list_collections(who, "g1")
    assert _exact(listed, ByogCollections) and listed["collections"] == ["people"]
    assert _exact(byog.delete_collection(who, "g1", "people"), ByogCollectionDeleted)
    assert _exact(byog.delete_database(who, "g1"), ByogDatabaseDeleted)


def test_the_webhook_answers_and_delivery_records_fit_their_types(local: LocalApp) -> None:
    hooks, who = local.services.webhooks, _who(local)
    assert hooks is not None
    assert _exact(hooks.get(who), WebhookState)  # none registered yet
    closed = "http://127.0.0.1:9/hook"  # a closed port: the test delivery fails at once
    registered = hooks.register(who, closed, None, None, True)
    assert _exact(registered, WebhookView) and "signing_secret" in registered
    assert _exact(hooks.get(who), WebhookState)
    assert _exact(hooks.set_secret(who, None), SecretSet)
    cleared = hooks.clear_secret(who)
    assert _exact(cleared, WebhookView) and "signing_secret" not in cleared
    assert _exact(hooks.send_test(who), WebhookTestResult)
    page = hooks.list_deliveries(who, None, None, None)
    assert _exact(page, DeliveryPage) and page["count"] == 1
    [delivery] = page["deliveries"]
    assert _exact(delivery, DeliveryView)
    assert _exact(hooks.get_delivery(who, delivery["delivery_id"]), DeliveryView)
    assert _exact(hooks.retry_delivery(who, delivery["delivery_id"]), RetryQueued)
    assert _exact(hooks.delete(who), WebhookDeleted)


def test_the_connector_answers_fit_their_types(local: LocalApp, slack: FakeSlack) -> None:
    conns, who = local.services.connectors, _who(local)
    assert conns is not None
    token = slack.add_token("xoxb-answers")
    slack.add_channel("CANS", "answers")
    slack.add_channel("CANS2", "answers-2")
    catalogue = conns.catalogue(None)
    assert _exact(catalogue, Catalogue) and all(_exact(e, CatalogueEntry) for e in catalogue["providers"])
    assert _exact(conns.catalogue("slack"), ProviderView)
    body = {"provider": "slack", "credentials": {"access_token": token}}
    preview = conns.preview(body, None, 1)
    assert _exact(preview, DiscoverPageView) and all(_exact(r, DiscoveredResource) for r in preview["resources"])
    created = conns.create(who, {**body, "database": DB})
    assert _exact(created, ConnectorView) and "min_sync_interval_seconds" in created
    cid = created["connector_id"]
    assert _exact(conns.get(who, cid), ConnectorView)
    assert all(_exact(c, ConnectorView) for c in conns.list_connectors(who, None)["connectors"])
    assert _exact(conns.discover(who, cid, None, None), DiscoverPageView)
    assert _exact(conns.configure(who, cid, {"resources": [{"resource_id": "CANS"}]}), Configured)
    added = conns.add_resource(who, cid, {"resource_id": "CANS2", "resource_type": "channel"})
    assert _exact(added, ResourceView) and _exact(added["filters"], ResourceFilters)
    listed = conns.list_resources(who, cid)
    assert _exact(listed, ResourceList) and all(_exact(r, ResourceView) for r in listed["resources"])
    assert _exact(conns.update(who, cid, {"name": "renamed"}), ConnectorUpdated)
    LocalRunner(local.container.queue, [connector_spec(conns)]).drain()  # the first sync runs: a manual one may queue
    assert _exact(conns.trigger_sync(who, cid), SyncQueued)
    assert _exact(conns.delete_resource(who, cid, "CANS2"), ResourceDeleted)
    assert _exact(conns.delete(who, cid), ConnectorDeleted)
