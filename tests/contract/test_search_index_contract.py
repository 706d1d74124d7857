"""Contract of the SearchIndex port; every adapter passes the same suite."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ctxstore.ports.search_index import ChunkDoc, ItemKey, SearchFilter, SearchIndex, Store
from tests.contract.search_index_factories import SEARCH_INDEXES

DIM = 8
ORG = "org1"
STORES: tuple[Store, ...] = ("knowledge", "memory")
DB = "db1"


def unit(*components: float) -> npt.NDArray[np.float32]:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(components)] = components
    return (v / np.linalg.norm(v)).astype(np.float32)


def axis(i: int) -> npt.NDArray[np.float32]:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def chunk(
    chunk_id: str,
    text: str,
    *,
    item_id: str | None = None,
    database: str = DB,
    collection: str = "c1",
    store: Store = "knowledge",
    vector: npt.NDArray[np.float32] | None = None,
    title: str = "",
    metadata: dict[str, Any] | None = None,
    additional_metadata: dict[str, Any] | None = None,
    position: int = 0,
) -> ChunkDoc:
    return ChunkDoc(
        chunk_id=chunk_id,
        item_id=item_id or f"item-{chunk_id}",
        database=database,
        collection=collection,
        store=store,
        text=text,
        vector=vector,
        title=title,
        metadata=metadata or {},
        additional_metadata=additional_metadata or {},
        position=position,
    )


def flt(
    collections: tuple[str, ...] = ("c1",),
    *,
    database: str = DB,
    store: Store = "knowledge",
    metadata: dict[str, Any] | None = None,
    additional_metadata: dict[str, Any] | None = None,
    item_ids: list[str] | None = None,
) -> SearchFilter:
    return SearchFilter(
        database=database,
        collections=collections,
        store=store,
        metadata=metadata or {},
        additional_metadata=additional_metadata or {},
        item_ids=item_ids,
    )


def ids(hits: list[Any]) -> list[str]:
    return [h.chunk_id for h in hits]


@pytest.fixture(params=sorted(SEARCH_INDEXES))
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SearchIndex]]:
    """Opens the index in one folder; every handle opened is closed at teardown."""
    closers: list[Callable[[], None]] = []

    def open_index() -> SearchIndex:
        index, close = SEARCH_INDEXES[request.param](tmp_path)
        closers.append(close)
        return index

    yield open_index
    for close in reversed(closers):
        close()


@pytest.fixture
def index(opener: Callable[[], SearchIndex]) -> SearchIndex:
    ix = opener()
    assert ix.ensure_database(ORG, DB) is True
    return ix


def test_upsert_then_get_chunks_roundtrip(index: SearchIndex) -> None:
    doc = ChunkDoc(
        chunk_id="a#0",
        item_id="a",
        database=DB,
        collection="c1",
        store="knowledge",
        text="Solar panels convert sunlight into electricity.",
        vector=unit(1, 2, 3),
        title="Solar",
        source_type="pdf",
        created_at=1700000000.5,
        metadata={"lang": "en", "tags": ["energy", "sun"]},
        additional_metadata={"page": 3},
        position=4,
    )
    index.upsert(ORG, [doc, chunk("b#0", "no vector here")])
    got = index.get_chunks(ORG, ["b#0", "missing", "a#0"])
    assert [c.chunk_id for c in got] == ["b#0", "a#0"]
    a = got[1]
    assert (a.item_id, a.database, a.collection, a.store) == ("a", DB, "c1", "knowledge")
    assert (a.text, a.title, a.source_type, a.created_at, a.position) == (doc.text, "Solar", "pdf", 1700000000.5, 4)
    assert a.metadata == {"lang": "en", "tags": ["energy", "sun"]} and a.additional_metadata == {"page": 3}
    assert a.vector is not None and a.vector.dtype == np.float32
    assert doc.vector is not None and np.allclose(a.vector, doc.vector, rtol=0, atol=1e-6)
    assert got[0].vector is None
    assert index.get_chunks("other-org", ["a#0"]) == []
    assert index.get_chunks(ORG, []) == []


def test_upsert_replaces_same_chunk_id(index: SearchIndex) -> None:
    index.upsert(ORG, [chunk("a#0", "the old walrus text", vector=axis(0))])
    index.upsert(ORG, [chunk("a#0", "a brand new pelican text", vector=axis(1), metadata={"v": 2})])
    assert index.count(ORG, DB, "knowledge") == 1
    assert index.keyword_search(ORG, flt(), "walrus", limit=5) == []
    assert ids(index.keyword_search(ORG, flt(), "pelican", limit=5)) == ["a#0"]
    hits = index.vector_search(ORG, flt(), axis(1), limit=5)
    assert ids(hits) == ["a#0"] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert index.get_chunks(ORG, ["a#0"])[0].metadata == {"v": 2}
    # duplicates inside one batch: the last copy wins
    index.upsert(ORG, [chunk("d#0", "first"), chunk("d#0", "second copy")])
    assert [c.text for c in index.get_chunks(ORG, ["d#0"])] == ["second copy"]


def test_keyword_ranking_sanity(index: SearchIndex) -> None:
    index.upsert(
        ORG,
        [
            chunk("strong", "Graphene batteries charge fast; graphene anodes make batteries last longer."),
            chunk("weak", "Lithium batteries are common in phones and laptops today."),
            chunk("none", "The recipe needs flour, sugar and two eggs."),
            chunk("titled", "An overview of new materials.", title="Graphene batteries"),
        ],
    )
    hits = index.keyword_search(ORG, flt(), "graphene batteries", limit=10)
    got = ids(hits)
    assert "none" not in got
    assert set(got[:2]) == {"strong", "titled"} and got[-1] == "weak"
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))
    assert hits[0].item_id == f"item-{hits[0].chunk_id}" and hits[0].collection == "c1"
    # stemming: "charging" finds "charge"
    assert "strong" in ids(index.keyword_search(ORG, flt(), "charging", limit=10))
    assert len(index.keyword_search(ORG, flt(), "graphene batteries", limit=1)) == 1


def test_keyword_operators(index: SearchIndex) -> None:
    index.upsert(
        ORG,
        [
            chunk("both", "the quick brown fox jumps"),
            chunk("split", "brown bears and a quick lunch"),
            chunk("one", "a brown table"),
        ],
    )
    assert set(ids(index.keyword_search(ORG, flt(), "quick brown", limit=10))) == {"both", "split", "one"}
    assert set(ids(index.keyword_search(ORG, flt(), "quick brown", limit=10, operator="or"))) == {
        "both",
        "split",
        "one",
    }
    assert set(ids(index.keyword_search(ORG, flt(), "quick brown", limit=10, operator="and"))) == {"both", "split"}
    assert ids(index.keyword_search(ORG, flt(), "quick brown", limit=10, operator="phrase")) == ["both"]
    assert ids(index.keyword_search(ORG, flt(), '"Quick, BROWN!"', limit=10, operator="phrase")) == ["both"]
    assert index.keyword_search(ORG, flt(), "brown quick", limit=10, operator="phrase") == []
    assert index.keyword_search(ORG, flt(), "", limit=10) == []
    assert index.keyword_search(ORG, flt(), "  ?!  ", limit=10) == []


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "((fox",
        "fox)",
        "NEAR(fox brown, 2)",
        "fox NEAR brown",
        "fox*",
        "*",
        "-fox",
        "fox -brown",
        "text:fox",
        "scope:fox",
        "{title text}: fox",
        "fox AND OR NOT",
        "NOT",
        "^fox",
        "fox + brown",
        "a'b\"c;DROP TABLE chunks;--",
        "\x00 fox \u2603",
    ],
)
def test_hostile_query_strings_never_raise(index: SearchIndex, query: str) -> None:
    index.upsert(ORG, [chunk("a", "the brown fox and the NOT operator near text")])
    for op in ("or", "and", "phrase"):
        hits = index.keyword_search(ORG, flt(), query, limit=5, operator=op)
        assert all(h.chunk_id == "a" for h in hits)
    assert index.count(ORG, DB, "knowledge") == 1


def test_vector_top_k(index: SearchIndex) -> None:
    index.upsert(
        ORG,
        [
            chunk("x", "x", vector=axis(0)),
            chunk("near-x", "nx", vector=unit(1, 0.3)),
            chunk("y", "y", vector=axis(1)),
            chunk("far", "far", vector=unit(-1, 0.1)),
            chunk("novec", "no vector"),
        ],
    )
    hits = index.vector_search(ORG, flt(), axis(0), limit=3)
    assert ids(hits) == ["x", "near-x", "y"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[1].score == pytest.approx(float(unit(1, 0.3)[0]), abs=1e-5)
    assert ids(index.vector_search(ORG, flt(), axis(0), limit=10)) == ["x", "near-x", "y", "far"]
    assert index.vector_search(ORG, flt(), axis(0), limit=0) == []


def test_scope_isolation(index: SearchIndex) -> None:
    v = axis(2)
    index.upsert(ORG, [chunk("mine", "zebra stripes", vector=v)])
    index.upsert(ORG, [chunk("other-coll", "zebra stripes", collection="c2", vector=v)])
    index.upsert(ORG, [chunk("other-store", "zebra stripes", store="memory", vector=v)])
    index.ensure_database(ORG, "db2")
    index.upsert(ORG, [chunk("other-db", "zebra stripes", database="db2", vector=v)])
    index.ensure_database("org2", DB)
    index.upsert("org2", [chunk("other-org", "zebra stripes", vector=v)])

    assert ids(index.keyword_search(ORG, flt(), "zebra", limit=10)) == ["mine"]
    assert ids(index.vector_search(ORG, flt(), v, limit=10)) == ["mine"]
    both = flt(("c1", "c2"))
    assert set(ids(index.keyword_search(ORG, both, "zebra", limit=10))) == {"mine", "other-coll"}
    assert set(ids(index.vector_search(ORG, both, v, limit=10))) == {"mine", "other-coll"}
    assert ids(index.keyword_search(ORG, flt(store="memory"), "zebra", limit=10)) == ["other-store"]
    assert ids(index.vector_search(ORG, flt(database="db2"), v, limit=10)) == ["other-db"]
    assert ids(index.vector_search("org2", flt(), v, limit=10)) == ["other-org"]
    assert index.keyword_search(ORG, flt(("nope",)), "zebra", limit=10) == []
    assert index.vector_search(ORG, flt(("nope",)), v, limit=10) == []
    assert index.vector_search("org3", flt(), v, limit=10) == []
    # the same chunk_id in another org is a different chunk
    index.upsert("org2", [chunk("mine", "org two text")])
    assert index.get_chunks(ORG, ["mine"])[0].text == "zebra stripes"
    assert index.count(ORG, DB, "knowledge") == 2 and index.count("org2", DB, "knowledge") == 2


def test_metadata_filters(index: SearchIndex) -> None:
    index.upsert(
        ORG,
        [
            chunk("en-news", "market report", vector=axis(0), metadata={"lang": "en", "kind": "news", "year": 2024}),
            chunk("de-news", "market report", vector=axis(0), metadata={"lang": "de", "kind": "news", "year": 2023}),
            chunk("en-blog", "market report", vector=axis(0), metadata={"lang": "en", "kind": "blog"}),
            chunk("tagged", "market report", vector=axis(0), metadata={"tags": ["finance", "eu"], "draft": True}),
            chunk("user", "market report", vector=axis(0), additional_metadata={"author": "ann", "score": 5}),
        ],
    )

    def both(**kw: Any) -> tuple[set[str], set[str]]:
        f = flt(**kw)
        kwd = set(ids(index.keyword_search(ORG, f, "market", limit=20)))
        vec = set(ids(index.vector_search(ORG, f, axis(0), limit=20)))
        return kwd, vec

    def check(expected: set[str], **kw: Any) -> None:
        kwd, vec = both(**kw)
        assert kwd == expected and vec == expected, kw

    check({"en-news", "en-blog"}, metadata={"lang": "en"})
    check({"en-news"}, metadata={"lang": "en", "kind": "news"})
    check({"en-news", "de-news"}, metadata={"lang": ["en", "de"], "kind": "news"})
    check({"en-news"}, metadata={"year": 2024})
    check(set(), metadata={"year": "2024"})  # exact: a string is not a number
    check({"tagged"}, metadata={"tags": "eu"})  # a stored list matches any of its elements
    check({"tagged"}, metadata={"tags": ["nope", "finance"]})
    check({"tagged"}, metadata={"draft": True})
    check(set(), metadata={"lang": "fr"})
    check(set(), metadata={"lang": []})
    check({"user"}, additional_metadata={"author": "ann"})
    check({"user"}, additional_metadata={"score": [4, 5]})
    check(set(), additional_metadata={"lang": "en"})  # the two metadata maps are separate
    check(set(), metadata={"author": "ann"})


def test_item_ids_prefilter(index: SearchIndex) -> None:
    docs = [chunk(f"best{i}", "shared words here", item_id=f"best{i}", vector=unit(1, 0.01 * i)) for i in range(30)]
    docs += [
        chunk("ok1", "shared words here", item_id="keep", vector=unit(1, 2)),
        chunk("ok2", "shared words here", item_id="keep", vector=unit(1, 3), position=1),
        chunk("ok3", "shared words here", item_id="also", vector=unit(1, 4)),
    ]
    index.upsert(ORG, docs)
    f = flt(item_ids=["keep", "also", "absent"])
    # the 30 closer vectors are filtered out before the top-k, so all three allowed chunks come back
    assert ids(index.vector_search(ORG, f, axis(0), limit=3)) == ["ok1", "ok2", "ok3"]
    assert set(ids(index.keyword_search(ORG, f, "shared", limit=3))) == {"ok1", "ok2", "ok3"}
    assert index.vector_search(ORG, flt(item_ids=[]), axis(0), limit=3) == []
    assert index.keyword_search(ORG, flt(item_ids=[]), "shared", limit=3) == []


def test_delete_item(index: SearchIndex) -> None:
    index.upsert(
        ORG,
        [
            chunk("a#0", "alpha text", item_id="a", vector=axis(0)),
            chunk("a#1", "alpha more", item_id="a", vector=axis(0), position=1),
            chunk("b#0", "alpha beta", item_id="b", vector=axis(0)),
            chunk("a-elsewhere", "alpha", item_id="a", collection="c2", vector=axis(0)),
        ],
    )
    assert index.vector_search(ORG, flt(), axis(0), limit=10)  # warm any cache before deleting
    assert index.delete_item(ORG, DB, "c1", "knowledge", "a") == 2
    assert index.delete_item(ORG, DB, "c1", "knowledge", "a") == 0
    assert ids(index.keyword_search(ORG, flt(), "alpha", limit=10)) == ["b#0"]
    assert ids(index.vector_search(ORG, flt(), axis(0), limit=10)) == ["b#0"]
    assert ids(index.keyword_search(ORG, flt(("c2",)), "alpha", limit=10)) == ["a-elsewhere"]
    assert index.get_chunks(ORG, ["a#0", "a#1"]) == []


def test_replace_items_swaps_each_items_chunks_and_leaves_the_rest(index: SearchIndex) -> None:
    """A worker's batch write: the listed items end with exactly their new chunks (an item listed without
    chunks is emptied); other items, and the same id in another collection, are untouched."""
    index.upsert(
        ORG,
        [
            chunk("a#0", "alpha old", item_id="a", vector=axis(0)),
            chunk("a#1", "alpha tail", item_id="a", vector=axis(0), position=1),
            chunk("b#0", "beta old", item_id="b", vector=axis(1)),
            chunk("c#0", "gamma kept", item_id="c", vector=axis(2)),
            chunk("a-elsewhere", "alpha", item_id="a", collection="c2", vector=axis(0)),
        ],
    )
    assert index.vector_search(ORG, flt(), axis(0), limit=10)  # warm any cache before the write
    keys = [
        ItemKey(DB, "c1", "knowledge", "a"),
        ItemKey(DB, "c1", "knowledge", "b"),
        ItemKey(DB, "c1", "knowledge", "d"),
    ]
    index.replace_items(
        ORG,
        keys,
        [
            chunk("a#0", "alpha new", item_id="a", vector=axis(3)),
            chunk("d#0", "delta new", item_id="d", vector=axis(4)),
        ],
    )
    assert [c.text for c in index.item_chunks(ORG, DB, "c1", "knowledge", "a")] == ["alpha new"]
    assert index.item_chunks(ORG, DB, "c1", "knowledge", "b") == []
    assert [c.text for c in index.item_chunks(ORG, DB, "c1", "knowledge", "d")] == ["delta new"]
    assert [c.text for c in index.item_chunks(ORG, DB, "c1", "knowledge", "c")] == ["gamma kept"]
    assert ids(index.keyword_search(ORG, flt(), "alpha", limit=10)) == ["a#0"]
    assert ids(index.keyword_search(ORG, flt(), "old", limit=10)) == []
    assert ids(index.keyword_search(ORG, flt(("c2",)), "alpha", limit=10)) == ["a-elsewhere"]
    assert ids(index.vector_search(ORG, flt(), axis(3), limit=1)) == ["a#0"]
    assert "b#0" not in ids(index.vector_search(ORG, flt(), axis(1), limit=10))
    assert index.count(ORG, DB, "knowledge") == 4


def test_delete_scope(index: SearchIndex) -> None:
    for coll in ("c1", "c2"):
        for store in STORES:
            index.upsert(
                ORG,
                [chunk(f"{coll}-{store}-{i}", "gamma", collection=coll, store=store, vector=axis(i)) for i in range(3)],
            )
    index.upsert(ORG, [chunk("keep", "gamma", database="db2", vector=axis(0))])
    assert index.vector_search(ORG, flt(("c1", "c2")), axis(0), limit=10)
    assert index.delete_scope(ORG, DB, "c1") == 6
    assert index.count(ORG, DB, "knowledge") == 3 and index.count(ORG, DB, "memory") == 3
    assert index.keyword_search(ORG, flt(), "gamma", limit=10) == []
    assert index.vector_search(ORG, flt(), axis(0), limit=10) == []
    assert len(index.vector_search(ORG, flt(("c1", "c2")), axis(0), limit=10)) == 3
    assert index.delete_scope(ORG, DB, None) == 6
    assert index.count(ORG, DB, "knowledge") == 0 and index.count(ORG, DB, "memory") == 0
    assert index.vector_search(ORG, flt(("c2",)), axis(0), limit=10) == []
    assert ids(index.keyword_search(ORG, flt(database="db2"), "gamma", limit=10)) == ["keep"]
    assert index.delete_scope(ORG, DB, None) == 0


def test_count(index: SearchIndex) -> None:
    assert index.count(ORG, DB, "knowledge") == 0
    index.upsert(ORG, [chunk(f"k{i}", "t") for i in range(5)] + [chunk("m", "t", store="memory")])
    assert index.count(ORG, DB, "knowledge") == 5
    assert index.count(ORG, DB, "memory") == 1
    assert index.count(ORG, "db2", "knowledge") == 0
    assert index.count("org2", DB, "knowledge") == 0


def test_persistence_across_reopen(opener: Callable[[], SearchIndex]) -> None:
    first = opener()
    first.ensure_database(ORG, DB)
    first.upsert(ORG, [chunk("p#0", "persistent penguin", vector=axis(3), metadata={"k": "v"})])
    assert ids(first.vector_search(ORG, flt(), axis(3), limit=1)) == ["p#0"]
    second = opener()
    assert ids(second.keyword_search(ORG, flt(), "penguin", limit=5)) == ["p#0"]
    assert ids(second.vector_search(ORG, flt(metadata={"k": "v"}), axis(3), limit=5)) == ["p#0"]
    assert second.count(ORG, DB, "knowledge") == 1
    # a write through one handle is seen by another handle's warm cache
    second.upsert(ORG, [chunk("p#1", "second penguin", vector=unit(0, 0, 0, 1, 0.1))])
    assert ids(first.vector_search(ORG, flt(), axis(3), limit=5)) == ["p#0", "p#1"]
    first.delete_item(ORG, DB, "c1", "knowledge", "item-p#0")
    assert ids(second.vector_search(ORG, flt(), axis(3), limit=5)) == ["p#1"]


def test_concurrent_readers_and_a_writer(index: SearchIndex) -> None:
    index.upsert(ORG, [chunk(f"seed{i}", "common words", vector=axis(i % DIM)) for i in range(20)])
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                assert len(index.vector_search(ORG, flt(), axis(0), limit=5)) == 5
                assert index.keyword_search(ORG, flt(), "common", limit=5)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(40):
            index.upsert(ORG, [chunk(f"w{i}", "common words", vector=axis(i % DIM))])
            if i % 3 == 0:
                index.delete_item(ORG, DB, "c1", "knowledge", f"item-w{i - 1}")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    expected = 20 + 40 - len([i for i in range(40) if i % 3 == 0 and i > 0])
    assert index.count(ORG, DB, "knowledge") == expected
    assert len(index.vector_search(ORG, flt(), axis(1), limit=100)) == expected


def test_an_item_streamed_as_one_delete_then_several_upserts_holds_exactly_its_new_chunks(index: SearchIndex) -> None:
    """The call shape of IngestPipeline.publish_batches (the Step Functions Index task): delete_item once, then
    the item's new chunks in several upserts; nothing of the old version stays, every new chunk is there."""
    index.upsert(ORG, [chunk(f"old#{i}", f"old text {i}", item_id="s", position=i) for i in range(5)])
    index.upsert(ORG, [chunk("other#0", "another item", item_id="t")])
    index.delete_item(ORG, DB, "c1", "knowledge", "s")
    new = [chunk(f"new#{i}", f"new text {i}", item_id="s", position=i, vector=axis(i % DIM)) for i in range(7)]
    for start in range(0, len(new), 3):
        index.upsert(ORG, new[start : start + 3])
    got = index.item_chunks(ORG, DB, "c1", "knowledge", "s")
    assert [c.chunk_id for c in got] == [f"new#{i}" for i in range(7)]
    assert [c.chunk_id for c in index.item_chunks(ORG, DB, "c1", "knowledge", "t")] == ["other#0"]
    assert index.count(ORG, DB, "knowledge") == 8
