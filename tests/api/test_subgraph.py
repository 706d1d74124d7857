"""GET /context/{id}/subgraph and GET /context/subgraph?id=: the item graph walked breadth-first."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.app import LocalApp


@pytest.fixture
def db(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme")
    return local


def ingest(la: LocalApp, items: list[dict[str, Any]], **form: str) -> None:
    for it in items:
        it.setdefault("content", {"text": f"Item {it['id']}."})
    r = la.client.post(
        "/context/ingest", data={"database": "acme", "app_knowledge": json.dumps(items), **form}, headers=la.headers()
    )
    assert r.status_code == 202, r.text
    la.drain()


def sub(la: LocalApp, item_id: str, **params: Any) -> Any:
    return la.client.get(
        f"/context/{quote(item_id, safe='')}/subgraph", params={"database": "acme", **params}, headers=la.headers()
    )


def ids(data: dict[str, Any]) -> list[str]:
    return [s["source_id"] for s in data["sources"]]


# root -> (reply_to) a; b child of root; c same thread as root; d relates to b; e relates to d (depth 3)
GRAPH = [
    {
        "id": "root",
        "title": "Root",
        "type": "message",
        "thread_id": "t1",
        "provider": "slack",
        "external_id": "X1",
        "timestamp": 100,
    },
    {"id": "a", "relates_to": [{"id": "root", "relation": "reply_to"}], "timestamp": 101},
    {"id": "b", "parent_id": "root", "timestamp": 102},
    {"id": "c", "thread_id": "t1", "timestamp": 103},
    {"id": "d", "relates_to": [{"id": "b", "relation": "references"}], "timestamp": 104},
    {"id": "e", "relates_to": [{"id": "d", "relation": "references"}], "timestamp": 105},
]


def test_breadth_first_members_and_relations(db: LocalApp) -> None:
    ingest(db, [dict(x) for x in GRAPH])
    r = sub(db, "root")
    assert r.status_code == 200
    data = r.json()["data"]
    assert data["success"] is True and data["seed_source_id"] == "root"
    members = {s["source_id"]: s for s in data["sources"]}
    assert ids(data)[0] == "root"
    assert [members[i]["depth"] for i in ids(data)] == sorted(members[i]["depth"] for i in ids(data)), "BFS order"
    start = members["root"]
    assert start["depth"] == 0 and "discovered_via" not in start and "discovered_relation" not in start
    assert start["title"] == "Root" and start["app_kind"] == "message" and start["app_provider"] == "slack"
    assert start["app_external_id"] == "X1" and start["thread_id"] == "t1" and start["hydration"] == "resolved"
    assert (members["a"]["depth"], members["a"]["discovered_via"], members["a"]["discovered_relation"]) == (
        1,
        "root",
        "reply_to",
    )
    assert (members["b"]["depth"], members["b"]["discovered_relation"]) == (1, "child")
    assert (members["c"]["depth"], members["c"]["discovered_relation"]) == (1, "same_thread")
    assert (members["d"]["depth"], members["d"]["discovered_via"], members["d"]["discovered_relation"]) == (
        2,
        "b",
        "references",
    )
    assert members["e"]["depth"] == 3
    assert data["max_depth_reached"] == 3 and data["is_truncated"] is False
    rels = {
        (g["source"]["entity_id"], g["relations"][0]["canonical_predicate"], g["target"]["entity_id"])
        for g in data["relations"]
    }
    assert {
        ("a", "reply_to", "root"),
        ("root", "parent_of", "b"),
        ("root", "same_thread", "c"),
        ("d", "references", "b"),
        ("e", "references", "d"),
    } == rels
    g = data["relations"][0]
    assert g["source"]["type"] == "SOURCE" and g["target"]["type"] == "SOURCE"
    assert isinstance(g["relations"][0]["timestamp"], str)
    # from the child, the parent is discovered as "parent"
    members_b = {s["source_id"]: s for s in sub(db, "b", depth=1).json()["data"]["sources"]}
    assert members_b["root"]["discovered_relation"] == "parent"


def test_depth_limit_truncates_a_frontier_that_goes_on(db: LocalApp) -> None:
    ingest(db, [dict(x) for x in GRAPH])
    data = sub(db, "root", depth=2).json()["data"]
    assert "e" not in ids(data) and "d" in ids(data)
    assert data["max_depth_reached"] == 2 and data["is_truncated"] is True
    assert sub(db, "root", depth=3).json()["data"]["is_truncated"] is False


@pytest.mark.parametrize("depth", ["0", "11", "-1", "x"])
def test_depth_out_of_range_is_invalid_input(db: LocalApp, depth: str) -> None:
    r = sub(db, "root", depth=depth)
    assert r.status_code == 400
    body = r.json()
    assert body["success"] is False and body["error"]["code"] == "INVALID_INPUT"


def test_max_sources_clips_closest_first(db: LocalApp) -> None:
    ingest(db, [dict(x) for x in GRAPH])
    data = sub(db, "root", max_sources=3).json()["data"]
    assert len(data["sources"]) == 3 and data["is_truncated"] is True
    assert all(s["depth"] <= 1 for s in data["sources"])
    assert len(sub(db, "root", max_sources=5000).json()["data"]["sources"]) == 6, "clipped to 1000, not refused"
    assert len(sub(db, "root", max_sources=0).json()["data"]["sources"]) == 1


# top -> three children, each with three children (ingested in time order: children sort by timestamp)
TREE = (
    [{"id": "top", "timestamp": 1}]
    + [{"id": f"c{i}", "parent_id": "top", "timestamp": 10 + i} for i in range(1, 4)]
    + [
        {"id": f"g{i}{j}", "parent_id": f"c{i}", "timestamp": 100 + 10 * i + j}
        for i in range(1, 4)
        for j in range(1, 4)
    ]
)


def test_a_walk_that_fills_up_mid_level_keeps_frontier_order(db: LocalApp) -> None:
    # the second level is read in slices sized to the room left; the members must be the first ones
    # in frontier order all the same, and what is left unread decides is_truncated
    ingest(db, [dict(x) for x in TREE])
    full = ids(sub(db, "top").json()["data"])
    assert full == ["top", "c1", "c2", "c3", "g11", "g12", "g13", "g21", "g22", "g23", "g31", "g32", "g33"]
    for n in (2, 4, 5, 6, 8, 12):
        data = sub(db, "top", max_sources=n).json()["data"]
        assert ids(data) == full[:n] and data["is_truncated"] is True, n
    vias = {s["source_id"]: s.get("discovered_via") for s in sub(db, "top", max_sources=8).json()["data"]["sources"]}
    assert (vias["g13"], vias["g21"]) == ("c1", "c2")
    assert sub(db, "top", max_sources=13).json()["data"]["is_truncated"] is False


def test_a_full_walk_whose_frontier_reaches_only_members_is_not_truncated(db: LocalApp) -> None:
    ingest(db, [{"id": x, "thread_id": "tt", "timestamp": i} for i, x in enumerate(("p", "q", "r"))])
    data = sub(db, "p", max_sources=3).json()["data"]
    assert ids(data) == ["p", "q", "r"] and data["is_truncated"] is False
    data = sub(db, "p", max_sources=2).json()["data"]
    assert ids(data) == ["p", "q"] and data["is_truncated"] is True


def test_unknown_id_is_success_with_empty_lists(db: LocalApp) -> None:
    data = sub(db, "ghost").json()
    assert data["success"] is True
    d = data["data"]
    assert (d["sources"], d["relations"], d["auxiliary_relations"], d["max_depth_reached"]) == ([], [], [], 0)


def test_item_without_links_is_alone_at_depth_0(db: LocalApp) -> None:
    ingest(db, [{"id": "solo"}])
    d = sub(db, "solo").json()["data"]
    assert ids(d) == ["solo"] and d["max_depth_reached"] == 0 and d["relations"] == []


def test_link_to_an_item_ingested_later_connects(db: LocalApp) -> None:
    ingest(db, [{"id": "early", "relates_to": [{"id": "late", "relation": "references"}]}])
    assert ids(sub(db, "early").json()["data"]) == ["early"], "a link to nothing yet reaches no one"
    ingest(db, [{"id": "late"}])
    assert ids(sub(db, "late").json()["data"]) == ["late", "early"]


def test_slash_ids_use_the_query_form_and_encoded_ids_the_path(db: LocalApp) -> None:
    ingest(db, [{"id": "a/b", "thread_id": "t"}, {"id": "c d?", "thread_id": "t"}])
    r = db.client.get("/context/subgraph", params={"database": "acme", "id": "a/b"}, headers=db.headers())
    assert r.status_code == 200 and ids(r.json()["data"]) == ["a/b", "c d?"]
    assert ids(sub(db, "c d?").json()["data"]) == ["c d?", "a/b"]


def test_acl_is_applied_at_every_hop(db: LocalApp) -> None:
    ingest(
        db,
        [
            {"id": "s", "thread_id": "t"},
            {
                "id": "hidden",
                "relates_to": [{"id": "s", "relation": "reply_to"}],
                "additional_metadata": {"acl": ["alice"]},
            },
            {"id": "beyond", "relates_to": [{"id": "hidden", "relation": "reply_to"}]},
            {"id": "mate", "thread_id": "t"},
        ],
    )
    assert set(ids(sub(db, "s").json()["data"])) == {"s", "hidden", "beyond", "mate"}
    bob = sub(db, "s", acl="bob").json()["data"]
    assert ids(bob) == ["s", "mate"], "the hidden item and what is only reachable through it are cut"
    assert all("hidden" not in (g["source"]["entity_id"], g["target"]["entity_id"]) for g in bob["relations"])
    assert set(ids(sub(db, "s", acl=["bob", "alice"]).json()["data"])) == {"s", "hidden", "beyond", "mate"}
    d = sub(db, "hidden", acl="bob").json()["data"]
    assert d["sources"] == [] and d["max_depth_reached"] == 0


def test_auxiliary_relations_are_mentions_with_empty_context(db: LocalApp) -> None:
    ingest(db, [{"id": "m", "content": {"text": "Microsoft acquired GitHub in 2018."}}])
    d = sub(db, "m").json()["data"]
    aux = {
        (g["source"]["entity_id"], g["relations"][0]["canonical_predicate"], g["target"]["name"])
        for g in d["auxiliary_relations"]
    }
    assert aux == {("m", "mentions", "Microsoft"), ("m", "mentions", "GitHub")}
    assert all(g["relations"][0]["context"] == "" for g in d["auxiliary_relations"])
    assert d["auxiliary_truncated"] is False


def test_deleted_item_leaves_the_item_graph(db: LocalApp) -> None:
    ingest(db, [dict(x) for x in GRAPH])
    r = db.client.request("DELETE", "/context", json={"database": "acme", "ids": ["b"]}, headers=db.headers())
    assert r.status_code == 200
    assert set(ids(sub(db, "root").json()["data"])) == {"root", "a", "c"}
    assert sub(db, "b").json()["data"]["sources"] == []


def test_memory_graph_is_separate_and_subgraph_uses_query_rate_class(tmp_path: Any) -> None:
    from tests.support.app import make_app

    la = make_app(tmp_path / "d", query_rate_limit_per_minute=1, rate_limit_per_minute=1000)
    try:
        la.create_ready_database("acme")
        ingest(la, [{"id": "k"}])
        assert ids(sub(la, "k").json()["data"]) == ["k"]
        r = sub(la, "k", type="memory")
        assert r.status_code == 429 and r.json()["error"]["code"] == "RATE_LIMITED"
    finally:
        la.close()
