"""The OpenSearch adapter on a strict Classic VECTORSEARCH collection (tests/aws/fake_opensearch.py).

The fake refuses what AWS's supported-operations table leaves out (_delete_by_query, _update_by_query,
custom _id on writes, refresh, scripts) and shows writes and deletes in searches only after a refresh
delay on a clock the test moves (AOSS Classic: 60 s). Here: each refusal, then deletes, replaces and
purges, a bulk re-sent after a timeout, and what readers see while copies of a chunk coexist.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import requests
from botocore.credentials import Credentials
from opensearchpy import NotFoundError, OpenSearch, RequestError

from ctxstore.adapters.aws.opensearch_index import OpenSearchIndex, opensearch_client
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.search_index import ChunkDoc, ItemKey, LaggingSearchIndex, SearchFilter
from tests.aws.fake_opensearch import FakeClock, FakeCollection, RecordingAdapter, connection_class

ENDPOINT = "https://abc123.us-east-1.aoss.amazonaws.com"
INDEX = "ctxstore-chunks"
REFRESH = 60.0
ITEM = ItemKey("db", "c1", "knowledge", "a")


class Strict:
    """The adapter, its raw client and the collection behind them, on one clock."""

    def __init__(self, delay: float = REFRESH, adapter_class: type[RecordingAdapter] = RecordingAdapter) -> None:
        self.clock = FakeClock(1000.0)
        self.coll = FakeCollection(refresh_delay=delay, clock=self.clock)
        self.wire = adapter_class(self.coll)
        self.client: OpenSearch = opensearch_client(
            ENDPOINT, "us-east-1", Credentials("AKIDTEST", "secret"), connection_class=connection_class(self.wire)
        )
        self.index = OpenSearchIndex(self.client, dimension=4)
        self.index.ensure_database("org", "db")

    def refresh(self) -> None:
        self.clock.advance(REFRESH)

    def paths(self) -> list[str]:
        return [r.path for r in self.wire.requests]


def chunk(chunk_id: str, text: str, *, version: str = "v1", item_id: str = "a", **kw: Any) -> ChunkDoc:
    return ChunkDoc(
        chunk_id=chunk_id,
        item_id=item_id,
        database="db",
        collection=kw.pop("collection", "c1"),
        store="knowledge",
        text=text,
        vector=np.array([1, 0, 0, 0], dtype=np.float32),
        version=version,
        **kw,
    )


def found(s: Strict, words: str) -> list[str]:
    return [h.chunk_id for h in s.index.keyword_search("org", SearchFilter("db", [], "knowledge"), words, limit=10)]


# -- the collection refuses what AOSS refuses ---------------------------------------------------------------


def test_delete_and_update_by_query_answer_404_not_a_count() -> None:
    s = Strict(delay=0)
    s.index.upsert("org", [chunk("a#0", "walrus")])
    query = {"query": {"term": {"org": "org"}}}
    for call in (s.client.delete_by_query, s.client.update_by_query):
        with pytest.raises(NotFoundError) as err:
            call(index=INDEX, body=query)
        assert err.value.status_code == 404 and "deleted" not in (err.value.info or {})
    assert found(s, "walrus") == ["a#0"]  # nothing was deleted


def test_custom_document_ids_are_refused_on_every_write_form() -> None:
    s = Strict(delay=0)
    body = {"org": "org", "chunk_id": "x"}
    for write in (
        lambda: s.client.index(index=INDEX, body=body, id="x"),
        lambda: s.client.create(index=INDEX, id="x", body=body),
        lambda: s.client.update(index=INDEX, id="x", body={"doc": body}),
    ):
        with pytest.raises(RequestError, match="Document ID is not supported"):
            write()
    resp = s.client.bulk(
        body=[
            {"index": {"_index": INDEX, "_id": "x"}},
            body,
            {"create": {"_index": INDEX, "_id": "y"}},
            body,
            {"update": {"_index": INDEX, "_id": "z"}},
            {"doc": body},
        ]
    )
    assert resp["errors"] is True and [next(iter(i.values()))["status"] for i in resp["items"]] == [400, 400, 400]
    assert s.coll.stored(INDEX) == {}


def test_refresh_and_scripts_are_refused() -> None:
    s = Strict(delay=0)
    with pytest.raises(RequestError, match="refresh"):
        s.client.indices.refresh(index=INDEX)
    with pytest.raises(RequestError, match="refresh"):
        s.client.bulk(body=[{"index": {"_index": INDEX}}, {"org": "org"}], refresh=True)
    with pytest.raises(RequestError, match="scripts"):
        s.client.search(
            index=INDEX,
            body={"query": {"script_score": {"query": {"match_all": {}}, "script": {"source": "1"}}}},
        )
    with pytest.raises(RequestError, match="scripts"):
        s.client.put_script(id="s", body={"script": {"lang": "painless", "source": "1"}})
    assert s.coll.stored(INDEX) == {}


def test_the_adapter_sends_none_of_the_refused_operations() -> None:
    s = Strict()
    s.index.upsert("org", [chunk("a#0", "walrus"), chunk("a#1", "pelican", position=1)])
    s.refresh()
    s.index.replace_items("org", [ITEM], [chunk("a#0", "walrus", version="v2")])
    s.index.delete_item("org", "db", "c1", "knowledge", "a")
    s.index.delete_scope("org", "db", "c1")
    s.index.delete_scope("org", "db", None)
    s.index.settle_item("org", ITEM, "v2")
    for r in s.wire.requests:
        assert not r.path.endswith(("_delete_by_query", "_update_by_query", "_refresh")) and "refresh" not in r.query
        assert "/_doc/" not in r.path and "/_create/" not in r.path and "/_update/" not in r.path
        if r.path == "/_bulk":
            lines = iter(r.body)
            for action in lines:
                ((op, meta),) = action.items()
                assert op in ("index", "delete") and (op == "delete") == ("_id" in meta)
                if op == "index":
                    next(lines)  # the document


def test_writes_show_only_after_the_refresh_delay() -> None:
    s = Strict()
    s.index.upsert("org", [chunk("a#0", "walrus")])
    assert found(s, "walrus") == [] and s.index.count("org", "db", "knowledge") == 0
    s.clock.advance(REFRESH - 1)
    assert found(s, "walrus") == []
    s.clock.advance(1)
    assert found(s, "walrus") == ["a#0"] and s.index.count("org", "db", "knowledge") == 1
    assert s.index.delete_item("org", "db", "c1", "knowledge", "a") == 1
    assert found(s, "walrus") == ["a#0"]  # a delete shows at the next refresh too
    s.refresh()
    assert found(s, "walrus") == [] and s.index.count("org", "db", "knowledge") == 0


# -- deletes, replaces, purges ------------------------------------------------------------------------------


def test_delete_is_a_search_for_ids_then_a_bulk_delete_checked_per_item() -> None:
    s = Strict(delay=0)
    s.index.upsert(
        "org", [chunk("a#0", "walrus"), chunk("a#1", "pelican", position=1), chunk("b#0", "gull", item_id="b")]
    )
    s.wire.requests.clear()
    assert s.index.delete_item("org", "db", "c1", "knowledge", "a") == 2
    search, bulk = s.wire.requests
    assert search.path == f"/{INDEX}/_search" and search.body["_source"] is False
    assert [next(iter(a)) for a in bulk.body] == ["delete", "delete"]
    assert found(s, "walrus pelican gull") == ["b#0"]


@pytest.mark.parametrize(("status", "error"), [(429, StoreUnavailable), (503, StoreUnavailable), (400, RuntimeError)])
def test_a_failed_bulk_delete_raises(status: int, error: type[Exception]) -> None:
    class Failing(RecordingAdapter):
        def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
            resp = super().send(request, **kwargs)
            if request.url and request.url.endswith("/_bulk") and b'"delete"' in (request.body or b""):
                answer = {
                    "took": 1,
                    "errors": True,
                    "items": [
                        {
                            "delete": {
                                "_index": INDEX,
                                "_id": "x",
                                "status": status,
                                "error": {"type": "e", "reason": "r"},
                            }
                        }
                    ],
                }
                resp._content = json.dumps(answer).encode()
            return resp

    s = Strict(delay=0, adapter_class=Failing)
    s.index.upsert("org", [chunk("a#0", "walrus")])
    with pytest.raises(error):
        s.index.delete_item("org", "db", "c1", "knowledge", "a")


def test_deletes_page_through_more_ids_than_one_search_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxstore.adapters.aws.opensearch_index as mod

    monkeypatch.setattr(mod, "PAGE", 3)
    s = Strict(delay=0)
    s.index.upsert("org", [chunk(f"a#{i}", f"walrus {i}", position=i) for i in range(8)])
    s.wire.requests.clear()
    assert s.index.delete_scope("org", "db", None) == 8
    searches = [r for r in s.wire.requests if r.path.endswith("/_search")]
    assert len(searches) == 3 and "search_after" in searches[1].body
    assert s.coll.stored(INDEX) == {}


def test_collection_and_database_purges_remove_exactly_their_scope() -> None:
    s = Strict()
    s.index.upsert("org", [chunk("a#0", "walrus"), chunk("b#0", "walrus", item_id="b", collection="c2")])
    s.index.upsert("org2", [chunk("a#0", "walrus")])
    s.refresh()
    assert s.index.delete_scope("org", "db", "c1") == 1
    s.refresh()
    assert found(s, "walrus") == ["b#0"]
    assert s.index.delete_scope("org", "db", None) == 1
    s.refresh()
    assert found(s, "walrus") == [] and s.index.count("org2", "db", "knowledge") == 1


def test_a_replace_racing_the_refresh_converges() -> None:
    """v2 replaces v1 before v1 is searchable: the delete misses v1, so both show after the refresh. Readers
    see v2 only; settling v2 deletes v1 and count is exact again."""
    s = Strict()
    s.index.upsert("org", [chunk("a#0", "old walrus"), chunk("a#1", "shared pelican", position=1)])
    s.index.replace_items(
        "org",
        [ITEM],
        [chunk("a#1", "shared pelican", version="v2", position=1), chunk("a#9", "new gull", version="v2")],
    )
    s.refresh()
    assert s.index.count("org", "db", "knowledge") == 4  # both versions are there
    assert [(c.chunk_id, c.version) for c in s.index.item_chunks("org", "db", "c1", "knowledge", "a")] == [
        ("a#9", "v2"),
        ("a#1", "v2"),
    ]
    assert [c.version for c in s.index.get_chunks("org", ["a#1", "a#0"])] == ["v2", "v1"]  # newest copy of a#1
    assert s.index.settle_item("org", ITEM, "v2") == 2
    s.refresh()
    assert s.index.count("org", "db", "knowledge") == 2
    assert found(s, "walrus") == [] and sorted(found(s, "pelican gull")) == ["a#1", "a#9"]


# -- a bulk re-sent after a timeout -------------------------------------------------------------------------


class TimesOutOnce(RecordingAdapter):
    """The first bulk lands, but its answer never arrives (the client's read times out)."""

    timed_out = False

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        resp = super().send(request, **kwargs)
        if request.url and request.url.endswith("/_bulk") and not self.timed_out:
            self.timed_out = True
            raise requests.exceptions.ReadTimeout("read timed out")
        return resp


def test_the_client_never_resends_a_timed_out_bulk() -> None:
    s = Strict(adapter_class=TimesOutOnce)
    with pytest.raises(StoreUnavailable):
        s.index.upsert("org", [chunk("a#0", "walrus")])
    assert s.paths().count("/_bulk") == 1
    assert len(s.coll.stored(INDEX)) == 1  # it did land


@pytest.mark.parametrize("status", [502, 504])
def test_the_client_never_resends_a_bulk_a_gateway_gave_up_on(status: int) -> None:
    class GatewayGivesUp(RecordingAdapter):
        def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
            resp = super().send(request, **kwargs)
            if request.url and request.url.endswith("/_bulk"):
                resp.status_code, resp._content = status, b'{"message": "gateway timeout"}'
            return resp

    s = Strict(adapter_class=GatewayGivesUp)
    with pytest.raises(StoreUnavailable):
        s.index.upsert("org", [chunk("a#0", "walrus")])
    assert s.paths().count("/_bulk") == 1 and len(s.coll.stored(INDEX)) == 1


def test_a_retried_index_task_leaves_no_duplicate_a_reader_sees() -> None:
    s = Strict(adapter_class=TimesOutOnce)
    docs = [chunk("a#0", "walrus"), chunk("a#1", "pelican", position=1)]
    with pytest.raises(StoreUnavailable):
        s.index.upsert("org", docs)
    s.index.upsert("org", docs)  # the task's retry: its delete cannot see the first copy yet
    s.refresh()
    assert len(s.coll.stored(INDEX)) == 4 and s.index.count("org", "db", "knowledge") == 4
    assert sorted(found(s, "walrus pelican")) == ["a#0", "a#1"]
    hits = s.index.vector_search(
        "org", SearchFilter("db", [], "knowledge"), np.array([1, 0, 0, 0], np.float32), limit=10
    )
    assert sorted(h.chunk_id for h in hits) == ["a#0", "a#1"]
    assert [c.chunk_id for c in s.index.item_chunks("org", "db", "c1", "knowledge", "a")] == ["a#0", "a#1"]
    assert [c.chunk_id for c in s.index.get_chunks("org", ["a#0", "a#1"])] == ["a#0", "a#1"]
    assert s.index.settle_item("org", ITEM, "v1") == 2
    s.refresh()
    assert s.index.count("org", "db", "knowledge") == 2  # exact once settled


def test_settle_keeps_the_newest_copy_of_a_chunk_and_leaves_newer_versions() -> None:
    s = Strict()
    s.index.upsert("org", [chunk("a#0", "walrus", metadata={"k": 1})])
    s.index.upsert("org", [chunk("a#0", "walrus", metadata={"k": 2})])  # a metadata update before the refresh
    s.index.upsert("org", [chunk("a#5", "gull", version="v3")])
    s.refresh()
    assert s.index.get_chunks("org", ["a#0"])[0].metadata == {"k": 2}
    assert s.index.settle_item("org", ITEM, "v1") == 1
    s.refresh()
    assert sorted(src["metadata"].get("k", 0) for src in s.coll.stored(INDEX).values()) == [0, 2]


def test_the_adapter_is_a_lagging_index() -> None:
    assert isinstance(Strict(delay=0).index, LaggingSearchIndex)
