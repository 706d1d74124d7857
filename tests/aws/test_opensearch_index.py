"""The OpenSearch Serverless adapter's wire format: exact request bodies, SigV4 for "aoss", responses to port types.

Requests go through the real opensearch-py client and RequestsHttpConnection (SigV4 signing included) into a
recording transport (tests/aws/fake_opensearch.py). The port's behaviour is covered by the contract suite,
which runs this adapter against the in-memory collection (tests/contract/search_index_factories.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from botocore.credentials import Credentials

from ctxstore.adapters.aws.opensearch_index import (
    OpenSearchIndex,
    dot_from_score,
    index_body,
    meta_terms,
    opensearch_client,
)
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.search_index import ChunkDoc, SearchFilter
from tests.aws.fake_opensearch import FakeCollection, RecordingAdapter, Request, connection_class

ENDPOINT = "https://abc123.eu-west-1.aoss.amazonaws.com"
INDEX = "ctxstore-chunks"


class Scripted(FakeCollection):
    """Answers chosen requests with canned responses (documented formats); the rest go to the fake."""

    def __init__(self) -> None:
        super().__init__()
        self.script: list[tuple[Callable[[Request], bool], tuple[int, Any]]] = []

    def handle(self, req: Request) -> tuple[int, Any]:
        for i, (when, answer) in enumerate(self.script):
            if when(req):
                del self.script[i]
                return answer
        return super().handle(req)


@pytest.fixture
def wire() -> tuple[OpenSearchIndex, RecordingAdapter, Scripted]:
    coll = Scripted()
    adapter = RecordingAdapter(coll)
    client = opensearch_client(
        ENDPOINT, "eu-west-1", Credentials("AKIDEXAMPLE", "secret", "token"), connection_class=connection_class(adapter)
    )
    return OpenSearchIndex(client, dimension=4), adapter, coll


def doc(chunk_id: str = "a#0", **kw: Any) -> ChunkDoc:
    base: dict[str, Any] = dict(
        chunk_id=chunk_id,
        item_id="a",
        database="db",
        collection="c1",
        store="knowledge",
        text="Solar panels",
        vector=np.array([1, 0, 0, 0], dtype=np.float32),
        title="Sun",
    )
    base.update(kw)
    return ChunkDoc(**base)


def test_every_request_is_sigv4_signed_for_aoss(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, adapter, _ = wire
    index.ensure_database("org", "db")
    index.upsert("org", [doc()])
    assert adapter.requests
    for r in adapter.requests:
        auth = r.headers["Authorization"]
        assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/eu-west-1/aoss/aws4_request" in auth  # service "aoss", not "es"
        assert r.headers["X-Amz-Security-Token"] == "token" and "X-Amz-Content-SHA256" in r.headers


def test_index_is_created_once_with_the_mapping(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, adapter, _ = wire
    assert index.ensure_database("org", "db") is True
    assert index.ensure_database("org", "db2") is True  # one shared index: nothing more to create
    assert [(r.method, r.path) for r in adapter.requests] == [("HEAD", f"/{INDEX}"), ("PUT", f"/{INDEX}")]
    body = adapter.requests[1].body
    assert body == index_body(4)
    assert body["settings"] == {"index": {"knn": True}}
    props = body["mappings"]["properties"]
    assert props["vector"] == {
        "type": "knn_vector",
        "dimension": 4,
        "method": {
            "name": "hnsw",
            "engine": "faiss",
            "space_type": "innerproduct",
            "parameters": {"ef_construction": 128, "m": 16},
        },
    }
    assert props["text"] == {"type": "text", "analyzer": "english"} == props["title"]
    for f in ("org", "database", "collection", "store", "item_id", "chunk_id"):
        assert props[f] == {"type": "keyword"}
    assert props["metadata"] == {"type": "object", "enabled": False}
    assert body["mappings"]["dynamic"] == "strict"


def test_index_created_concurrently_elsewhere_is_fine(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, _, coll = wire
    coll.script.append((lambda r: r.method == "HEAD", (404, None)))
    coll.script.append(
        (
            lambda r: r.method == "PUT",
            (400, {"error": {"type": "resource_already_exists_exception", "reason": "exists"}, "status": 400}),
        )
    )
    assert index.ensure_database("org", "db") is True


def test_upsert_finds_old_copies_by_search_then_bulk_indexes_without_ids(
    wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted],
) -> None:
    index, adapter, _ = wire
    index.ensure_database("org", "db")
    adapter.requests.clear()
    meta = {"lang": "en", "tags": ["a", "b"], "year": 2024.0, "draft": True, "x": None}
    index.upsert(
        "org",
        [
            doc(text="first copy"),
            doc("b#0", vector=None, additional_metadata={"page": 3}),
            doc(text="latest copy", metadata=meta, version="v1"),
        ],
    )
    find, bulk = adapter.requests  # nothing to delete yet: no delete request
    assert (find.method, find.path, find.query) == ("POST", f"/{INDEX}/_search", {})
    assert find.body == {
        "_source": False,
        "query": {"bool": {"filter": [{"term": {"org": "org"}}, {"terms": {"chunk_id": ["a#0", "b#0"]}}]}},
        "sort": [{"chunk_id": "asc"}, {"write_id": "asc"}],
        "size": 1000,
    }
    assert (bulk.method, bulk.path) == ("POST", "/_bulk")
    assert "refresh" not in bulk.query  # VECTORSEARCH collections refuse refresh
    actions, sources = bulk.body[::2], bulk.body[1::2]
    assert actions == [{"index": {"_index": INDEX}}] * 2  # no _id: the collection assigns it
    a, b = sources
    assert a.pop("write_id") < b.pop("write_id")  # unique per document, ordered by time
    assert a == {
        "org": "org",
        "database": "db",
        "collection": "c1",
        "store": "knowledge",
        "item_id": "a",
        "chunk_id": "a#0",
        "version": "v1",
        "title": "Sun",
        "text": "latest copy",
        "source_type": "",
        "created_at": 0.0,
        "position": 0,
        "metadata": {"lang": "en", "tags": ["a", "b"], "year": 2024.0, "draft": True, "x": None},
        "additional_metadata": {},
        "meta_terms": [
            "m\x1flang\x1fs:en",
            "m\x1ftags\x1fs:a",
            "m\x1ftags\x1fs:b",
            "m\x1fyear\x1fn:2024",
            "m\x1fdraft\x1fb:true",
            "m\x1fx\x1fz:",
        ],
        "vector": [1.0, 0.0, 0.0, 0.0],
    }
    assert "vector" not in b and b["meta_terms"] == ["a\x1fpage\x1fn:3"]


def test_upsert_refuses_a_wrong_dimension_before_writing(
    wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted],
) -> None:
    index, adapter, _ = wire
    with pytest.raises(ValueError, match="dimension"):
        index.upsert("org", [doc(vector=np.ones(3, dtype=np.float32))])
    assert adapter.requests == []


def test_keyword_query_bodies(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, adapter, _ = wire
    index.ensure_database("org", "db")
    flt = SearchFilter(
        database="db",
        collections=["c1", "c2"],
        store="memory",
        metadata={"lang": ["en", "de"]},
        additional_metadata={"score": 5},
        item_ids=["i1"],
    )
    scope = [
        {"term": {"org": "org"}},
        {"term": {"database": "db"}},
        {"term": {"store": "memory"}},
        {"terms": {"collection": ["c1", "c2"]}},
        {"terms": {"item_id": ["i1"]}},
        {"terms": {"meta_terms": ["m\x1flang\x1fs:en", "m\x1flang\x1fs:de"]}},
        {"terms": {"meta_terms": ["a\x1fscore\x1fn:5"]}},
    ]
    for op, match in (
        ("or", {"query": "quick brown", "fields": ["title^2", "text"], "operator": "or"}),
        ("and", {"query": "quick brown", "fields": ["title^2", "text"], "operator": "and"}),
        ("phrase", {"query": "quick brown", "fields": ["title^2", "text"], "type": "phrase"}),
    ):
        adapter.requests.clear()
        index.keyword_search("org", flt, 'Quick, "brown"!', limit=5, operator=op)
        (req,) = adapter.requests
        assert (req.method, req.path) == ("POST", f"/{INDEX}/_search")
        assert req.body == {
            "size": 10,
            "_source": ["chunk_id", "item_id", "collection"],
            "query": {"bool": {"filter": scope, "must": [{"multi_match": match}]}},
        }
    adapter.requests.clear()
    assert index.keyword_search("org", flt, "?! ", limit=5) == []
    assert index.keyword_search("org", SearchFilter("db", [], "knowledge", item_ids=[]), "x", limit=5) == []
    assert index.keyword_search("org", SearchFilter("db", [], "knowledge", metadata={"k": []}), "x", limit=5) == []
    assert adapter.requests == []  # nothing can match: no request
    with pytest.raises(ValueError, match="operator"):
        index.keyword_search("org", flt, "x", limit=5, operator="near")


def test_knn_query_body_and_score_conversion(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, adapter, coll = wire
    index.ensure_database("org", "db")
    # A documented _search answer: innerproduct scores are 1 + ip (ip > 0) or 1 / (1 - ip).
    coll.script.append(
        (
            lambda r: r.path.endswith("/_search"),
            (
                200,
                {
                    "took": 3,
                    "timed_out": False,
                    "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                    "hits": {
                        "total": {"value": 3, "relation": "eq"},
                        "max_score": 1.8,
                        "hits": [
                            {
                                "_index": INDEX,
                                "_id": "1%3A0%3AxYz",
                                "_score": 1.8,
                                "_source": {"chunk_id": "a#0", "item_id": "a", "collection": "c1"},
                            },
                            {
                                "_index": INDEX,
                                "_id": "1%3A0%3AxYy",
                                "_score": 1.5,
                                "_source": {"chunk_id": "a#0", "item_id": "a", "collection": "c1"},
                            },  # a stale copy (no refresh)
                            {
                                "_index": INDEX,
                                "_id": "1%3A0%3AxYw",
                                "_score": 0.8,
                                "_source": {"chunk_id": "b#0", "item_id": "b", "collection": "c2"},
                            },
                        ],
                    },
                },
            ),
        )
    )
    hits = index.vector_search(
        "org", SearchFilter("db", ["c1"], "knowledge"), np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32), limit=5
    )
    (req,) = [r for r in adapter.requests if r.path.endswith("/_search")]
    assert req.body == {
        "size": 10,
        "_source": ["chunk_id", "item_id", "collection"],
        "query": {
            "knn": {
                "vector": {
                    "vector": [0.5, 0.5, 0.5, 0.5],
                    "k": 10,
                    "filter": {
                        "bool": {
                            "filter": [
                                {"term": {"org": "org"}},
                                {"term": {"database": "db"}},
                                {"term": {"store": "knowledge"}},
                                {"terms": {"collection": ["c1"]}},
                            ]
                        }
                    },
                }
            }
        },
    }
    assert [(h.chunk_id, h.item_id, h.collection) for h in hits] == [("a#0", "a", "c1"), ("b#0", "b", "c2")]
    assert hits[0].score == pytest.approx(0.8) and hits[1].score == pytest.approx(-0.25)
    assert dot_from_score(1.0) == 0.0
    with pytest.raises(ValueError, match="dimension"):
        index.vector_search("org", SearchFilter("db", [], "knowledge"), np.ones(3, dtype=np.float32), limit=1)


def test_chunk_reads_deletes_and_count(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, adapter, coll = wire
    index.ensure_database("org", "db")
    index.upsert("org", [doc("a#1", position=1, metadata={"k": "v"}), doc("a#0", created_at=1.5)])
    ids = set(coll.stored(INDEX))
    adapter.requests.clear()
    got = index.item_chunks("org", "db", "c1", "knowledge", "a")
    assert [c.chunk_id for c in got] == ["a#0", "a#1"] and got[0].created_at == 1.5
    assert got[1].metadata == {"k": "v"} and got[0].vector is not None and got[0].vector.dtype == np.float32
    (req,) = adapter.requests
    assert req.body["sort"] == [{"position": "asc"}, {"chunk_id": "asc"}, {"write_id": "asc"}]
    assert req.body["size"] == 1000
    assert req.body["query"] == {
        "bool": {
            "filter": [
                {"term": {"org": "org"}},
                {"term": {"database": "db"}},
                {"term": {"store": "knowledge"}},
                {"term": {"collection": "c1"}},
                {"term": {"item_id": "a"}},
            ]
        }
    }
    adapter.requests.clear()
    assert [c.chunk_id for c in index.get_chunks("org", ["a#1", "zz", "a#0", "a#1"])] == ["a#1", "a#0"]
    assert adapter.requests[0].body["query"] == {
        "bool": {"filter": [{"term": {"org": "org"}}, {"terms": {"chunk_id": ["a#1", "zz", "a#0"]}}]}
    }
    adapter.requests.clear()
    assert index.count("org", "db", "knowledge") == 2
    assert adapter.requests[0].path == f"/{INDEX}/_count"
    adapter.requests.clear()
    assert index.delete_item("org", "db", "c1", "knowledge", "a") == 2
    assert index.delete_scope("org", "db", "c1") == 0
    assert index.delete_scope("org", "db", None) == 0
    # Each delete: a _search for the _ids (no _source), then a bulk delete of exactly those ids.
    find, delete, find_c1, find_db = adapter.requests
    assert [r.path for r in (find, find_c1, find_db)] == [f"/{INDEX}/_search"] * 3
    assert [r.body["query"]["bool"]["filter"] for r in (find, find_c1, find_db)] == [
        [
            {"term": {"org": "org"}},
            {"term": {"database": "db"}},
            {"term": {"store": "knowledge"}},
            {"term": {"collection": "c1"}},
            {"term": {"item_id": "a"}},
        ],
        [{"term": {"org": "org"}}, {"term": {"database": "db"}}, {"term": {"collection": "c1"}}],
        [{"term": {"org": "org"}}, {"term": {"database": "db"}}],
    ]
    assert all(r.body["_source"] is False for r in (find, find_c1, find_db))
    assert (delete.method, delete.path) == ("POST", "/_bulk")
    assert {a["delete"]["_id"] for a in delete.body} == ids and len(delete.body) == 2
    assert all(a["delete"]["_index"] == INDEX for a in delete.body) and coll.stored(INDEX) == {}
    assert not any(r.path.endswith("_delete_by_query") for r in adapter.requests)


def test_reads_before_the_index_exists_are_empty(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, _, _ = wire
    flt = SearchFilter("db", [], "knowledge")
    assert index.keyword_search("org", flt, "x", limit=3) == []
    assert index.count("org", "db", "knowledge") == 0
    assert index.delete_scope("org", "db", None) == 0
    assert index.get_chunks("org", ["a"]) == []


@pytest.mark.parametrize("status", [429, 503])
def test_throttling_and_faults_are_transient(
    wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted], status: int
) -> None:
    index, _, coll = wire
    index.ensure_database("org", "db")
    answer = (status, {"error": {"type": "throttled", "reason": "slow down"}, "status": status})
    coll.script.extend([(lambda r: r.path.endswith("/_search"), answer)] * 3)  # the client retries 5xx twice
    with pytest.raises(StoreUnavailable):
        index.keyword_search("org", SearchFilter("db", [], "knowledge"), "x", limit=3)


def test_bulk_item_throttling_is_transient(wire: tuple[OpenSearchIndex, RecordingAdapter, Scripted]) -> None:
    index, _, coll = wire
    index.ensure_database("org", "db")
    coll.script.append(
        (
            lambda r: r.path == "/_bulk",
            (
                200,
                {
                    "took": 1,
                    "errors": True,
                    "items": [
                        {
                            "index": {
                                "_index": INDEX,
                                "status": 429,
                                "error": {"type": "es_rejected_execution_exception", "reason": "rejected"},
                            }
                        }
                    ],
                },
            ),
        )
    )
    with pytest.raises(StoreUnavailable):
        index.upsert("org", [doc()])


def test_metadata_tokens_are_typed() -> None:
    assert meta_terms("m", {"n": 1, "f": 1.5, "s": "1", "b": False, "o": {"x": 1}, "l": [1, [2]]}) == [
        "m\x1fn\x1fn:1",
        "m\x1ff\x1fn:1.5",
        "m\x1fs\x1fs:1",
        "m\x1fb\x1fb:false",
        "m\x1fl\x1fn:1",
    ]


def test_client_targets_the_collection_host_over_tls() -> None:
    client = opensearch_client(ENDPOINT, "eu-west-1", Credentials("a", "b"))
    conn = client.transport.get_connection()
    assert conn.host == "https://abc123.eu-west-1.aoss.amazonaws.com:443"
    assert conn.session.auth.service == "aoss" and conn.session.auth.signer.region == "eu-west-1"
    with pytest.raises(ValueError):
        opensearch_client("https://", "eu-west-1", Credentials("a", "b"))
