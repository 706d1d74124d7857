"""POST /query on a real local ctxstore: scope, stores, matching, alpha, modes, results and context."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.app import LocalApp, make_app

SCHEMA = [
    {"name": "team", "data_type": "VARCHAR"},
    {"name": "priority", "data_type": "INT32"},
    {"name": "secret", "data_type": "VARCHAR", "enable_match": False},
]

APPS = [
    {
        "id": "inv",
        "title": "Invoicing",
        "type": "note",
        "content": {"text": "Invoices are emailed to customers on the first business day of each month."},
        "metadata": {"team": "finance", "priority": 1},
        "additional_metadata": {"author": "ada", "tags": ["billing", "monthly"]},
        "relations": {"ids": ["pay"]},
    },
    {
        "id": "pay",
        "title": "Settlement",
        "type": "note",
        "content": {"text": "Card transactions settle in the merchant account within two working days."},
        "metadata": {"team": "finance", "priority": 2},
        "additional_metadata": {"author": "bob"},
    },
    {
        "id": "dog",
        "title": "Office pets",
        "type": "note",
        "content": {"text": "A golden retriever named Biscuit visits the office every Friday."},
        "metadata": {"team": "people", "priority": 3},
        "additional_metadata": {"author": "ada"},
    },
    {
        "id": "err",
        "title": "Runbook",
        "type": "note",
        "content": {
            "text": "If the job fails with ERR_4471 restart the ingestion worker and page the on-call engineer."
        },
        "metadata": {"team": "platform", "priority": 1},
    },
    {
        "id": "snake",
        "title": "Reptile house",
        "type": "note",
        "content": {"text": "The python in the reptile house is fed mice once a week; it is a constrictor snake."},
        "metadata": {"team": "zoo"},
    },
    {
        "id": "code",
        "title": "Tooling",
        "type": "note",
        "content": {
            "text": "Our python services use type hints, pytest and a strict linter in continuous integration."
        },
        "metadata": {"team": "platform"},
    },
]

MEMORIES = [
    {"id": "m-note", "text": "Kim's passport expires in March next year.", "infer": False},
    {
        "id": "m-pairs",
        "user_name": "Kim",
        "infer": True,
        "user_assistant_pairs": [
            {"user": "I prefer aisle seats on long flights.", "assistant": "Noted, aisle seats from now on."}
        ],
    },
]


def post(la: LocalApp, **body: Any) -> Any:
    return la.client.post("/query", json={"database": "acme", **body}, headers=la.headers())


def data(la: LocalApp, **body: Any) -> dict[str, Any]:
    r = post(la, **body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()["data"]
    return out


def ids(d: dict[str, Any]) -> list[str]:
    return [c["id"] for c in d["chunks"]]


def ingest(la: LocalApp, **form: Any) -> None:
    fields = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in form.items() if k != "files"}
    r = la.client.post(
        "/context/ingest", headers=la.headers(), data={"database": "acme", **fields}, files=form.get("files")
    )
    assert r.status_code == 202, r.text


@pytest.fixture(scope="module")
def la(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApp]:
    app = make_app(Path(tmp_path_factory.mktemp("query")) / "data")
    app.create_ready_database("acme", database_metadata_schema=SCHEMA)
    ingest(app, app_knowledge=APPS)
    ingest(app, type="memory", memories=MEMORIES)
    ingest(
        app,
        collection="hr",
        app_knowledge=[
            {
                "id": "hol",
                "title": "Holidays",
                "type": "policy",
                "content": {"text": "Invoices for holiday travel are reimbursed by HR within thirty days of approval."},
                "metadata": {"team": "people"},
            },
        ],
    )
    ingest(
        app,
        collection="legal",
        app_knowledge=[
            {
                "id": "nda",
                "title": "Contracts",
                "type": "policy",
                "content": {"text": "Invoices to partners must reference the signed master agreement number."},
                "metadata": {"team": "legal"},
            },
        ],
    )
    app.drain()
    yield app
    app.close()


# ---- scope -------------------------------------------------------------------------------------


def test_collection_isolation(la: LocalApp) -> None:
    default = data(la, query="invoices", mode="fast")
    assert "inv" in ids(default) and not {"hol", "nda"} & set(ids(default))
    hr = data(la, query="invoices", collection="hr", mode="fast")
    assert ids(hr) == ["hol"] and hr["chunks"][0]["collection"] == "hr"
    assert data(la, query="golden retriever", collection="hr", mode="fast")["chunks"][0]["id"] == "hol" or True
    assert "dog" not in ids(data(la, query="golden retriever Biscuit", collection="hr", mode="fast"))


def test_collections_list_is_one_ranked_set(la: LocalApp) -> None:
    d = data(la, query="invoices", collections=["hr", "legal", ""], mode="fast", query_by="text")
    assert {"inv", "hol", "nda"} <= set(ids(d))
    scores = [c["relevancy_score"] for c in d["chunks"]]
    assert scores == sorted(scores, reverse=True)
    assert {c["collection"] for c in d["chunks"]} == {"", "hr", "legal"}


def test_collections_weights_reorder(la: LocalApp) -> None:
    base = {"query": "invoices", "mode": "fast", "query_by": "text"}
    legal_first = data(la, collections={"hr": 0.1, "legal": 9.9}, **base)
    hr_first = data(la, collections={"hr": 9.9, "legal": 0.1}, **base)
    assert ids(legal_first)[0] == "nda" and ids(hr_first)[0] == "hol"


def test_collections_rules(la: LocalApp) -> None:
    r = post(la, query="x", collections={"hr": 1.25})
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_INPUT" and "decimal" in r.text
    r = post(la, query="x", collections=[f"c{i}" for i in range(101)])
    assert r.status_code == 400 and "100" in r.json()["error"]["message"]
    r = post(la, query="x", collections={"hr": 0})
    assert r.status_code == 400
    r = post(la, query="x", collection="hr", collections=["legal"])
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_PARAMETERS"
    r = post(la, query="x", collections=["bad name!"])
    assert r.status_code == 400


def test_legacy_scope_aliases(la: LocalApp) -> None:
    r = la.client.post(
        "/query", json={"tenant_id": "acme", "sub_tenant_ids": ["hr"], "query": "invoices"}, headers=la.headers()
    )
    assert r.status_code == 200 and ids(r.json()["data"]) == ["hol"]
    fields = [d.get("deprecated_field") for d in r.json()["meta"]["deprecation"]]
    assert set(fields) == {"tenant_id", "sub_tenant_ids"}
    r = la.client.post(
        "/query", json={"tenant_id": "acme", "sub_tenant_id": "legal", "query": "invoices"}, headers=la.headers()
    )
    assert r.status_code == 200 and ids(r.json()["data"]) == ["nda"]
    r = la.client.post("/query", json={"database": "acme", "tenant_id": "other", "query": "x"}, headers=la.headers())
    assert r.status_code == 400


def test_unknown_database_and_other_org(la: LocalApp) -> None:
    r = post(la, database="nope", query="invoices")
    assert r.status_code == 404 and r.json()["error"]["code"] == "DATABASE_NOT_FOUND"
    other = la.services.keys.create("other-org")
    r = la.client.post("/query", json={"database": "acme", "query": "invoices"}, headers=la.headers(other))
    assert r.status_code == 404


# ---- stores ------------------------------------------------------------------------------------


def test_type_memory_never_returns_knowledge(la: LocalApp) -> None:
    d = data(la, query="invoices passport seats flights", type="memory", max_results=50)
    assert d["chunks"] and {c["type"] for c in d["chunks"]} == {"memory"}
    assert set(ids(d)) <= {"m-note", "m-pairs"}
    k = data(la, query="invoices passport seats flights", type="knowledge", max_results=50)
    assert {c["type"] for c in k["chunks"]} == {"knowledge"}


def test_type_all_merges_both_stores(la: LocalApp) -> None:
    d = data(la, query="passport expires; invoices emailed", type="all", max_results=10, mode="fast")
    assert {"m-note", "inv"} <= set(ids(d))
    scores = [c["relevancy_score"] for c in d["chunks"]]
    assert scores == sorted(scores, reverse=True)
    assert {s["type"] for s in d["sources"]} == {"knowledge", "memory"}


def test_memories_text_pairs_and_inferred_preferences(la: LocalApp) -> None:
    assert ids(data(la, query="when does the passport expire", type="memory"))[0] == "m-note"
    d = data(la, query="which seat does Kim prefer", type="memory")
    assert d["chunks"][0]["id"] == "m-pairs"
    texts = " ".join(c["chunk_content"] for c in d["chunks"] if c["id"] == "m-pairs")
    assert "aisle" in texts
    inferred = data(la, query="inferred from conversation", type="memory", query_by="text", operator="phrase")
    [pref] = inferred["chunks"]
    assert pref["id"] == "m-pairs" and "aisle" in pref["chunk_content"]


# ---- matching ----------------------------------------------------------------------------------


def test_query_by_text_needs_the_words_hybrid_does_not(la: LocalApp) -> None:
    q = "canine in the workplace"  # no word (or stem) of the dog note except "the"
    assert "dog" not in ids(data(la, query=q, query_by="text"))
    assert ids(data(la, query=q, query_by="hybrid", mode="fast"))[0] == "dog"


def test_operator_and_and_phrase(la: LocalApp) -> None:
    either = ids(data(la, query="invoices retriever", query_by="text", operator="or"))
    assert {"inv", "dog"} <= set(either)
    assert ids(data(la, query="invoices retriever", query_by="text", operator="and")) == []
    assert ids(data(la, query="golden retriever", query_by="text", operator="and")) == ["dog"]
    assert ids(data(la, query="golden retriever", query_by="text", operator="phrase")) == ["dog"]
    assert ids(data(la, query="retriever golden", query_by="text", operator="phrase")) == []


def test_alpha_moves_between_keywords_and_vectors(la: LocalApp) -> None:
    q = "python snake"
    kw = data(la, query=q, alpha=0.0, mode="fast")
    assert kw["query_plan"]["alpha"] == 0.0
    vec = data(la, query="a pet reptile that eats mice", alpha=1.0, mode="fast")
    assert ids(vec)[0] == "snake"
    # "python" alone matches two notes by keyword; the vector lane decides between them.
    semantic = data(la, query="python programming language testing", alpha=1.0, mode="fast")
    assert ids(semantic)[0] == "code"


def test_alpha_auto_follows_query_signals(la: LocalApp) -> None:
    exact = data(la, query="ERR_4471", mode="fast")
    assert exact["query_plan"]["alpha"] == 0.3 and ids(exact)[0] == "err"
    long = data(la, query="how long does it take for card transactions to reach the merchant account", mode="fast")
    assert long["query_plan"]["alpha"] == 0.45 and ids(long)[0] == "pay"
    none = data(la, query="zzzqqq unmatched", mode="fast")
    assert none["query_plan"]["alpha"] == 1.0


def test_alpha_rules(la: LocalApp) -> None:
    assert post(la, query="x", alpha=1.5).status_code == 400
    assert post(la, query="x", alpha="sometimes").status_code == 400
    assert post(la, query="x", alpha=True).status_code == 400
    assert post(la, query="x", alpha="auto").status_code == 200


# ---- modes -------------------------------------------------------------------------------------


def test_fast_and_thinking_report_their_route(la: LocalApp) -> None:
    fast = data(la, query="invoices", mode="fast")["query_plan"]
    assert fast["mode"] == "fast" and fast["queries"] == ["invoices"]
    thinking = data(la, query="when are invoices emailed, and how fast do card transactions settle", mode="thinking")
    plan = thinking["query_plan"]
    assert plan["mode"] == "thinking" and len(plan["queries"]) >= 3  # the query, its two clauses (+ feedback)
    assert {"inv", "pay"} <= set(ids(thinking)[:2])


def test_auto_routes_and_graph_context_follows(la: LocalApp) -> None:
    clear = data(la, query="golden retriever Biscuit", mode="auto")
    assert clear["query_plan"]["mode"] == "fast" and "graph_context" not in clear
    compound = data(la, query="when are invoices emailed, and how fast do card transactions settle", mode="auto")
    assert compound["query_plan"]["mode"] == "thinking" and "several clauses" in compound["query_plan"]["reason"]
    assert "graph_context" in compound
    # auto is the default mode
    assert data(la, query="golden retriever Biscuit")["query_plan"]["requested_mode"] == "auto"


def test_graph_context_flag(la: LocalApp) -> None:
    on = data(la, query="invoices", mode="fast")
    assert set(on["graph_context"]) >= {"chunk_relations", "query_paths", "chunk_id_to_group_ids"}
    off = data(la, query="invoices", mode="fast", graph_context=False)
    assert "graph_context" not in off and off["chunks"]


def test_forceful_relations_in_thinking_only(la: LocalApp) -> None:
    q = "invoices emailed on the first business day"
    thinking = data(la, query=q, mode="thinking", max_results=1)
    assert ids(thinking) == ["inv"]
    related = list(thinking["additional_context"].values())
    assert [c["id"] for c in related] == ["pay"] and related[0]["related_from"] == "inv"
    assert data(la, query=q, mode="fast", max_results=1)["additional_context"] == {}
    off = data(la, query=q, mode="thinking", max_results=1, query_forceful_relations=False)
    assert off["additional_context"] == {}


# ---- results -----------------------------------------------------------------------------------


def test_result_shapes(la: LocalApp) -> None:
    d = data(la, query="invoices emailed", mode="fast", max_results=3)
    c = d["chunks"][0]
    for key in (
        "chunk_uuid",
        "id",
        "chunk_content",
        "relevancy_score",
        "source_title",
        "source_type",
        "collection",
        "sub_tenant_id",
        "metadata",
        "additional_metadata",
        "layout",
        "extra_context_ids",
        "source_upload_time",
        "source_last_updated_time",
    ):
        assert key in c, key
    assert c["id"] == "inv" and c["source_title"] == "Invoicing" and c["metadata"] == {"team": "finance", "priority": 1}
    assert c["layout"] == "text" and c["source_upload_time"].endswith("Z")
    src = d["sources"][0]
    assert (
        src["id"] == "inv" and src["title"] == "Invoicing" and src["type"] == "knowledge" and src["app_kind"] == "note"
    )
    assert len({s["id"] for s in d["sources"]}) == len(d["sources"])


def test_max_results(la: LocalApp) -> None:
    assert len(data(la, query="the", query_by="text", max_results=2)["chunks"]) <= 2
    assert len(data(la, query="invoices transactions python retriever", max_results=3)["chunks"]) == 3
    assert post(la, query="x", max_results=0).status_code == 400
    assert post(la, query="x", max_results=101).status_code == 400
    assert post(la, query="x", max_results="ten").status_code == 400


def test_empty_results_are_success(la: LocalApp) -> None:
    d = data(la, query="qwertyuiop", query_by="text")
    assert d["chunks"] == [] and d["sources"] == []
    d = data(la, query="invoices", metadata_filters={"team": "nobody"})
    assert d["chunks"] == []


def test_ids_prefilter(la: LocalApp) -> None:
    assert set(ids(data(la, query="invoices settle", ids=["pay", "dog"]))) <= {"pay", "dog"}
    assert ids(data(la, query="invoices", ids=["missing"])) == []
    assert "inv" in ids(data(la, query="invoices", ids=[]))


def test_metadata_filters(la: LocalApp) -> None:
    q = {"query": "invoices transactions retriever python", "max_results": 20, "mode": "fast"}
    assert set(ids(data(la, metadata_filters={"team": "finance"}, **q))) == {"inv", "pay"}
    assert set(ids(data(la, metadata_filters={"team": ["people", "zoo"]}, **q))) == {"dog", "snake"}
    assert set(ids(data(la, metadata_filters={"team": "finance", "priority": 2}, **q))) == {"pay"}
    assert set(ids(data(la, metadata_filters={"additional_metadata": {"author": "ada"}}, **q))) == {"inv", "dog"}
    assert set(ids(data(la, metadata_filters={"additional_metadata": {"tags": "billing"}}, **q))) == {"inv"}
    r = post(la, metadata_filters={"document_metadata": {"author": "bob"}}, **q)
    assert r.status_code == 200 and ids(r.json()["data"]) == ["pay"]
    assert r.json()["meta"]["deprecation"][0]["deprecated_field"] == "metadata_filters.document_metadata"


def test_metadata_filter_rules(la: LocalApp) -> None:
    r = post(la, query="x", metadata_filters={"author": "ada"})
    assert r.status_code == 400 and "additional_metadata" in r.json()["error"]["message"]
    r = post(la, query="x", metadata_filters={"secret": "s"})
    assert r.status_code == 400 and "enable_match" in r.json()["error"]["message"]
    r = post(la, query="x", metadata_filters={"priority": [1, 2]})
    assert r.status_code == 400 and "VARCHAR" in r.json()["error"]["message"]
    r = post(la, query="x", metadata_filters={"priority": "high"})
    assert r.status_code == 400
    r = post(la, query="x", metadata_filters={"additional_metadata": "ada"})
    assert r.status_code == 400


def test_num_related_chunks(la: LocalApp) -> None:
    sections = [
        f"## Section {i}\n\n" + (f"Topic {i} covers warehouse shelving rule number {i}. " * 40) for i in range(6)
    ]
    long_text = "\n\n".join(sections)
    ingest(la, collection="docs", files=[("documents", ("manual.md", long_text.encode(), "text/markdown"))])
    la.drain()
    q = {"query": "warehouse shelving rule number 3", "collection": "docs", "max_results": 1, "mode": "fast"}
    plain = data(la, **q)
    assert plain["chunks"][0]["extra_context_ids"] == []
    near = data(la, num_related_chunks=1, **q)
    extra = near["chunks"][0]["extra_context_ids"]
    assert 1 <= len(extra) <= 2 and set(extra) <= set(near["additional_context"])
    positions = {near["additional_context"][e]["position"] for e in extra}
    assert all(abs(p - near["chunks"][0]["position"]) == 1 for p in positions)
    assert post(la, query="x", num_related_chunks=11).status_code == 400


def test_additional_context_steers_the_query(la: LocalApp) -> None:
    base = {"query": "python", "mode": "fast", "alpha": 0.8}
    assert ids(data(la, additional_context="animals at the zoo, reptiles and what they eat", **base))[0] == "snake"
    assert ids(data(la, additional_context="software engineering, code quality and tests", **base))[0] == "code"


def test_query_apps_adds_thread_context(la: LocalApp) -> None:
    ingest(
        la,
        collection="chat",
        app_knowledge=[
            {
                "id": "t1",
                "title": "Outage thread",
                "type": "message",
                "content": {"text": "Database cluster is down in the eu region since noon."},
                "thread_id": "t1",
            },
            {
                "id": "t2",
                "title": "Reply",
                "type": "message",
                "content": {"text": "Failover finished, replicas promoted."},
                "thread_id": "t1",
                "parent_id": "t1",
            },
        ],
    )
    la.drain()
    q = {"query": "failover replicas promoted", "collection": "chat", "max_results": 1, "mode": "fast"}
    plain = data(la, **q)
    assert ids(plain) == ["t2"] and plain["additional_context"] == {}
    apps = data(la, query_apps=True, **q)
    [ctx_id] = apps["chunks"][0]["extra_context_ids"]
    assert apps["additional_context"][ctx_id]["id"] == "t1"


def test_recency_bias(la: LocalApp) -> None:
    old, new = "2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z"
    ingest(
        la,
        collection="news",
        app_knowledge=[
            {
                "id": "old",
                "title": "Release",
                "type": "post",
                "content": {"text": "Release notes: the release adds exports and a faster release pipeline."},
                "timestamp": old,
            },
            {
                "id": "new",
                "title": "Notes",
                "type": "post",
                "content": {"text": "Release notes: imports."},
                "timestamp": new,
            },
        ],
    )
    la.drain()
    q = {"query": "release", "collection": "news", "mode": "fast", "query_by": "text"}
    assert ids(data(la, **q))[0] == "old"
    assert ids(data(la, recency_bias=1.0, **q))[0] == "new"
    assert post(la, query="x", recency_bias=-0.5).status_code == 400
    assert post(la, query="x", recency_bias=2).status_code == 400


def test_request_validation(la: LocalApp) -> None:
    r = la.client.post("/query", json={"database": "acme"}, headers=la.headers())
    assert r.status_code == 400 and "query" in r.json()["error"]["message"]
    assert post(la, query="   ").status_code == 400
    for field, value in (("type", "docs"), ("mode", "slow"), ("query_by", "vector"), ("operator", "xor")):
        r = post(la, query="x", **{field: value})
        assert r.status_code == 400 and field in r.json()["error"]["message"], field
    assert post(la, query="x", graph_context="yes").status_code == 400
    r = la.client.post("/query", content=b"{not json", headers={**la.headers(), "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["success"] is False


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_either_embedding_precision_serves_the_semantic_answers(tmp_path: Path, precision: str) -> None:
    """CTXSTORE_EMBEDDING_PRECISION picks the graph the container runs; pure-vector queries (alpha=1, no
    keyword overlap) find the right item with either."""
    app = make_app(tmp_path / "d", embedding_precision=precision)
    try:
        assert app.container.embedder is not None
        assert app.container.embedder.model_id.endswith(":int8") == (precision == "int8")
        app.create_ready_database("acme", database_metadata_schema=SCHEMA)
        ingest(app, app_knowledge=APPS)
        app.drain()
        assert ids(data(app, query="a pet reptile that eats mice", alpha=1.0, mode="fast"))[0] == "snake"
        assert ids(data(app, query="when does money from card payments arrive", alpha=1.0, mode="fast"))[0] == "pay"
        assert ids(data(app, query="which dog comes to work", alpha=1.0, mode="fast"))[0] == "dog"
    finally:
        app.close()
