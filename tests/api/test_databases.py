"""Database lifecycle, collections, stats and the metadata schema."""

from __future__ import annotations

from ctxstore.ports.search_index import ChunkDoc
from tests.support.app import LocalApp

SCHEMA = [
    {"name": "region", "data_type": "VARCHAR", "max_length": 32, "enable_match": True},
    {"name": "priority", "data_type": "INT32"},
    {"name": "score", "data_type": "DOUBLE", "enable_match": False},
]


def test_create_is_asynchronous_then_ready(local: LocalApp) -> None:
    h = local.headers()
    r = local.client.post("/databases", json={"database": "acme"}, headers=h)
    assert r.status_code == 202 and r.json()["data"]["status"] == "provisioning"
    status = local.client.get("/databases/status", params={"database": "acme"}, headers=h).json()["data"]
    assert status["infra"]["ready_for_ingestion"] is False
    assert local.drain() == 1
    status = local.client.get("/databases/status", params={"database": "acme"}, headers=h).json()["data"]
    infra = status["infra"]
    assert infra["scheduler_status"] and infra["graph_status"]
    assert infra["vectorstore_status"] == {"knowledge": True, "memories": True}
    assert infra["ready_for_ingestion"] is True
    assert status["database"] == "acme" and status["org_id"] == "default"


def test_list_and_delete(local: LocalApp) -> None:
    h = local.headers()
    for name in ("b_db", "a_db"):
        local.create_ready_database(name)
    data = local.client.get("/databases", headers=h).json()["data"]
    assert data["databases"] == ["a_db", "b_db"] and data["tenant_ids"] == ["a_db", "b_db"]
    assert data["failed_databases"] == []
    r = local.client.delete("/databases", params={"database": "a_db"}, headers=h)
    assert r.status_code == 200 and r.json()["data"]["status"] == "completed"
    assert local.client.get("/databases", headers=h).json()["data"]["databases"] == ["b_db"]
    assert local.client.get("/databases/status", params={"database": "a_db"}, headers=h).status_code == 404
    assert local.client.delete("/databases", params={"database": "a_db"}, headers=h).status_code == 404
    # The name can be used again, from scratch.
    r = local.client.post("/databases", json={"database": "a_db"}, headers=h)
    assert r.status_code == 202


def test_delete_removes_everything_under_the_database(local: LocalApp) -> None:
    local.create_ready_database("acme")
    local.create_ready_database("keep")
    org = "default"
    blobs = local.container.blobs
    blobs.put(org, "acme/_default/item1/original", b"x")
    blobs.put(org, "acme/team/item2/original", b"y")
    blobs.put(org, "keep/_default/item3/original", b"z")
    principal = local.services.keys.authenticate(local.key)
    local.services.databases.note_collection(principal, "acme", "team")
    local.client.delete("/databases", params={"database": "acme"}, headers=local.headers())
    assert not blobs.exists(org, "acme/_default/item1/original")
    assert not blobs.exists(org, "acme/team/item2/original")
    assert blobs.exists(org, "keep/_default/item3/original")
    local.create_ready_database("acme")
    cols = local.client.get("/databases/collections", params={"database": "acme"}, headers=local.headers())
    assert cols.json()["data"]["collections"] == []


def test_invalid_database_names(local: LocalApp) -> None:
    for bad in ["", "has space", "../x", "-lead", "x" * 129, "semi;colon"]:
        r = local.client.post("/databases", json={"database": bad}, headers=local.headers())
        assert r.status_code == 400, bad
        assert r.json()["error"]["code"] == "INVALID_PARAMETERS"
        assert "database" in r.json()["error"]["message"]


def test_collections_list_and_delete(local: LocalApp) -> None:
    local.create_ready_database("acme")
    principal = local.services.keys.authenticate(local.key)
    for col in ("team", "eng"):
        local.services.databases.note_collection(principal, "acme", col)
    local.container.blobs.put("default", "acme/team/i1/original", b"1")
    local.container.blobs.put("default", "acme/eng/i2/original", b"2")
    h = local.headers()
    data = local.client.get("/databases/collections", params={"database": "acme"}, headers=h).json()["data"]
    assert data["collections"] == ["eng", "team"] and data["sub_tenant_ids"] == ["eng", "team"]
    r = local.client.request(
        "DELETE", "/databases/collections", params={"database": "acme", "collection": "team"}, headers=h
    )
    assert r.status_code == 200 and r.json()["data"]["deleted"] is True
    assert r.json()["meta"]["collection"] == "team"
    data = local.client.get("/databases/collections", params={"database": "acme"}, headers=h).json()["data"]
    assert data["collections"] == ["eng"]
    assert not local.container.blobs.exists("default", "acme/team/i1/original")
    assert local.container.blobs.exists("default", "acme/eng/i2/original")
    # the database itself stays
    assert local.client.get("/databases/status", params={"database": "acme"}, headers=h).status_code == 200
    r = local.client.request("DELETE", "/databases/collections", params={"database": "acme"}, headers=h)
    assert r.status_code == 400 and "collection" in r.json()["error"]["message"]


def test_stats_counts_indexed_rows(local: LocalApp) -> None:
    local.create_ready_database("acme")
    r = local.client.get("/databases/stats", params={"database": "acme"}, headers=local.headers())
    data = r.json()["data"]
    assert data["knowledge_collection"] == {"row_count": 0} and data["memory_collection"] == {"row_count": 0}
    idx = local.container.search_index
    if idx is None:
        return  # counted by the search index once one is configured
    idx.upsert(
        "default",
        [
            ChunkDoc(
                chunk_id=f"c{i}",
                item_id="i",
                database="acme",
                collection="",
                store="knowledge",
                text=f"chunk {i}",
                vector=None,
            )
            for i in range(3)
        ],
    )
    data = local.client.get("/databases/stats", params={"database": "acme"}, headers=local.headers()).json()["data"]
    assert data["knowledge_collection"]["row_count"] == 3


def test_metadata_schema_create_read_and_additive_update(local: LocalApp) -> None:
    h = local.headers()
    local.create_ready_database("acme", database_metadata_schema=SCHEMA)
    r = local.client.get("/databases/acme/metadata-schema", headers=h)
    fields = r.json()["data"]["database_metadata_schema"]
    assert [f["name"] for f in fields] == ["region", "priority", "score"]
    assert fields[0] == {
        "name": "region",
        "data_type": "VARCHAR",
        "enable_match": True,
        "enable_dense_embedding": False,
        "enable_sparse_embedding": False,
        "max_length": 32,
    }
    assert fields[2]["enable_match"] is False
    r = local.client.patch(
        "/databases/acme/metadata-schema", json={"add_fields": [{"name": "team", "data_type": "VARCHAR"}]}, headers=h
    )
    assert r.status_code == 200 and r.json()["data"] == {
        "database": "acme",
        "tenant_id": "acme",
        "added_fields": ["team"],
    }
    names = [
        f["name"]
        for f in local.client.get("/databases/acme/metadata-schema", headers=h).json()["data"][
            "database_metadata_schema"
        ]
    ]
    assert names == ["region", "priority", "score", "team"]


def test_metadata_schema_rejects_changes_and_bad_fields(local: LocalApp) -> None:
    h = local.headers()
    local.create_ready_database("acme", database_metadata_schema=SCHEMA)
    r = local.client.patch(
        "/databases/acme/metadata-schema", json={"add_fields": [{"name": "region", "data_type": "INT64"}]}, headers=h
    )
    assert r.status_code == 409 and "region" in r.json()["error"]["message"]
    bad = [
        ({"name": "9lives", "data_type": "VARCHAR"}, 422, "name"),
        ({"name": "ok", "data_type": "TEXT"}, 422, "data_type"),
        ({"name": "ok", "data_type": "INT8", "max_length": 3}, 422, "max_length"),
        ({"name": "ok", "data_type": "VARCHAR", "max_length": 0}, 422, "max_length"),
        ({"name": "ok", "data_type": "BOOL", "enable_match": "yes"}, 400, "enable_match"),
        ({"name": "ok", "data_type": "BOOL", "colour": "red"}, 400, "colour"),
        ({"name": "additional_metadata", "data_type": "JSON"}, 422, "reserved"),
    ]
    for field, status, word in bad:
        r = local.client.patch("/databases/acme/metadata-schema", json={"add_fields": [field]}, headers=h)
        assert r.status_code == status, (field, r.text)
        assert word in r.json()["error"]["message"], (field, r.text)
    r = local.client.patch("/databases/acme/metadata-schema", json={"add_fields": []}, headers=h)
    assert r.status_code == 400
    r = local.client.post(
        "/databases",
        json={
            "database": "dup",
            "database_metadata_schema": [{"name": "a", "data_type": "BOOL"}, {"name": "a", "data_type": "BOOL"}],
        },
        headers=h,
    )
    assert r.status_code == 422 and "twice" in r.json()["error"]["message"]
    # The schema is unchanged by every rejected update.
    names = [
        f["name"]
        for f in local.client.get("/databases/acme/metadata-schema", headers=h).json()["data"][
            "database_metadata_schema"
        ]
    ]
    assert names == ["region", "priority", "score"]


def test_legacy_schema_field_name(local: LocalApp) -> None:
    r = local.client.post(
        "/databases",
        json={"database": "acme", "tenant_metadata_schema": [{"name": "region", "data_type": "VARCHAR"}]},
        headers=local.headers(),
    )
    assert r.status_code == 202
    assert [d["deprecated_field"] for d in r.json()["meta"]["deprecation"]] == ["tenant_metadata_schema"]
    fields = local.client.get("/databases/acme/metadata-schema", headers=local.headers()).json()["data"]
    assert [f["name"] for f in fields["database_metadata_schema"]] == ["region"]


def test_deleting_a_database_leaves_similarly_named_ones_alone(local: LocalApp) -> None:
    principal = local.services.keys.authenticate(local.key)
    for name in ("db1", "db10"):
        local.create_ready_database(name)
        local.services.databases.note_collection(principal, name, "team")
    local.client.delete("/databases", params={"database": "db1"}, headers=local.headers())
    cols = local.client.get("/databases/collections", params={"database": "db10"}, headers=local.headers())
    assert cols.json()["data"]["collections"] == ["team"]
