"""Issue 25, the official client: what its generated models read that ctxstore answered otherwise.

POST /feedback (rules of the reference's feedback.SubmitRequest, kept durably), `X-HydraDB-Delete-Status:
strict`, list rows' `app_*` names and legacy scope names (projections too), the metadata-schema read's `fields`,
and the one rule that serves a bare-object reader and an envelope reader (http/reference_shape.py).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from ctxstore.http import reference_shape
from ctxstore.http.app import ALL_ROUTERS
from tests.support.app import LocalApp

SYNCED = {
    "id": "slack_T1_C1_1",
    "title": "standup",
    "type": "message",
    "provider": "slack",
    "external_id": "C1/1",
    "content": {"text": "Standup notes: Alice ships the parser."},
}


@pytest.fixture
def filled(local: LocalApp) -> LocalApp:
    local.create_ready_database("acme", database_metadata_schema=[{"name": "team", "data_type": "VARCHAR"}])
    form = {"database": "acme", "app_knowledge": json.dumps([SYNCED])}
    assert local.client.post("/context/ingest", data=form, headers=local.headers()).status_code == 202
    local.drain()
    return local


def _post_feedback(app: LocalApp, body: dict[str, Any]) -> Any:
    return app.client.post("/feedback", json=body, headers=app.headers())


# ---- feedback --------------------------------------------------------------------------------------------


def test_feedback_is_recorded_and_read_back(filled: LocalApp) -> None:
    rid = filled.client.post("/query", json={"database": "acme", "query": "Alice"}, headers=filled.headers()).json()[
        "meta"
    ]["request_id"]
    body = {
        "request_id": rid,
        "feedback": "missed the parser ticket",
        "rating": "negative",
        "source": "agent",
        "ground_truth": {"source_ids": ["slack_T1_C1_1"]},
        "metadata": {"agent": "support-bot"},
        "database": "acme",
    }
    r = _post_feedback(filled, body)
    assert r.status_code == 201, r.text
    out = r.json()
    data = out["data"]
    assert out["success"] is True and out["meta"]["database"] == "acme"
    assert data["recorded"] is True and data["request_id"] == rid and data["message"] == "Success"
    assert data["feedback_id"].startswith("fb_") and data["created_at"].endswith("Z")
    [kept] = filled.services.feedback.recorded(filled.services.keys.authenticate(filled.key))
    assert kept["feedback_id"] == data["feedback_id"] and kept["feedback"] == "missed the parser ticket"
    assert kept["rating"] == "negative" and kept["source"] == "agent" and kept["database"] == "acme"
    assert kept["ground_truth"] == {"source_ids": ["slack_T1_C1_1"]} and kept["metadata"] == {"agent": "support-bot"}
    # Ground truth alone suffices; source defaults to user.
    r = _post_feedback(filled, {"request_id": rid, "ground_truth": {"answer": "the parser"}})
    assert r.status_code == 201, r.text
    assert filled.services.feedback.recorded(filled.services.keys.authenticate(filled.key))[1]["source"] == "user"


RID = str(uuid.uuid4())


@pytest.mark.parametrize(
    "body",
    [
        {"feedback": "no request id"},
        {"request_id": "not-a-uuid", "feedback": "x"},
        {"request_id": RID},
        {"request_id": RID, "feedback": "   "},
        {"request_id": RID, "feedback": "x" * 8001},
        {"request_id": RID, "ground_truth": {}},
        {"request_id": RID, "ground_truth": {"source_ids": [" "]}},
        {"request_id": RID, "feedback": "x", "rating": "great"},
        {"request_id": RID, "feedback": "x", "source": "robot"},
        {"request_id": RID, "feedback": "x", "metadata": {"n": 1}},
        {"request_id": RID, "feedback": "x", "metadata": {f"k{i}": "v" for i in range(21)}},
        {"request_id": RID, "feedback": "x", "collection": "team"},
        {"request_id": RID, "feedback": "x", "database": "acme", "tenant_id": "other"},
    ],
)
def test_feedback_rules_are_400_invalid_parameters(filled: LocalApp, body: dict[str, Any]) -> None:
    r = _post_feedback(filled, body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "INVALID_PARAMETERS" and r.json()["data"] is None
    assert filled.services.feedback.recorded(filled.services.keys.authenticate(filled.key)) == []


def test_feedback_for_a_missing_database_is_404(filled: LocalApp) -> None:
    r = _post_feedback(filled, {"request_id": RID, "feedback": "x", "database": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "DATABASE_NOT_FOUND"
    # The legacy name is accepted and flagged.
    r = _post_feedback(filled, {"request_id": RID, "feedback": "x", "tenant_id": "acme"})
    assert r.status_code == 201 and r.json()["meta"]["deprecation"][0]["deprecated_field"] == "tenant_id"


# ---- strict deletes --------------------------------------------------------------------------------------


def test_strict_delete_status_is_404_for_an_unknown_id(filled: LocalApp) -> None:
    h = filled.headers()
    body = {"database": "acme", "ids": ["ghost"]}
    legacy = filled.client.request("DELETE", "/context", json=body, headers=h)
    assert legacy.status_code == 200 and legacy.json()["data"]["deleted_count"] == 0  # default unchanged
    strict = filled.client.request("DELETE", "/context", json=body, headers={**h, "X-HydraDB-Delete-Status": "strict"})
    assert strict.status_code == 404, strict.text
    assert strict.json()["error"]["code"] == "SOURCE_NOT_FOUND" and "ghost" in strict.json()["error"]["message"]
    bad = filled.client.request("DELETE", "/context", json=body, headers={**h, "X-HydraDB-Delete-Status": "sloppy"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_PARAMETERS"
    # A delete that happens is 200 in strict mode.
    body["ids"] = [str(SYNCED["id"])]
    done = filled.client.request("DELETE", "/context", json=body, headers={**h, "X-HydraDB-Delete-Status": "strict"})
    assert done.status_code == 200 and done.json()["data"]["deleted_count"] == 1


# ---- list rows -------------------------------------------------------------------------------------------


def test_connector_rows_use_the_app_names_and_always_carry_legacy_scope(filled: LocalApp) -> None:
    def rows(**extra: Any) -> list[dict[str, Any]]:
        r = filled.client.post("/context/list", json={"database": "acme", **extra}, headers=filled.headers())
        assert r.status_code == 200, r.text
        out: list[dict[str, Any]] = r.json()["data"]["sources"]
        return out

    [row] = rows()
    assert (row["app_provider"], row["app_kind"], row["app_external_id"]) == ("slack", "message", "C1/1")
    assert not {"provider", "app_type", "external_id"} & row.keys()
    assert row["tenant_id"] == "acme" and row["sub_tenant_id"] == ""
    [projected] = rows(include_fields=["title"])
    assert projected == {
        "id": SYNCED["id"],
        "title": "standup",
        "database": "acme",
        "collection": "",
        "tenant_id": "acme",
        "sub_tenant_id": "",
    }
    # A filter written against the old row names still finds the row.
    assert [r["id"] for r in rows(filters={"source_fields": {"provider": "slack"}})] == [SYNCED["id"]]
    assert rows(filters={"source_fields": {"app_provider": "github"}}) == []


def test_metadata_schema_read_names_its_list_fields(filled: LocalApp) -> None:
    data = filled.client.get("/databases/acme/metadata-schema", headers=filled.headers()).json()["data"]
    assert [f["name"] for f in data["fields"]] == ["team"] and data["fields"] == data["database_metadata_schema"]


# ---- the one rule ----------------------------------------------------------------------------------------


def test_bare_routes_named_in_the_table_exist_and_get_both_shapes(filled: LocalApp) -> None:
    declared = {
        (m, str(getattr(r, "path", "")))
        for router in ALL_ROUTERS
        for r in router.routes
        for m in getattr(r, "methods", ())
    }
    assert declared >= reference_shape.BARE_IN_REFERENCE  # a renamed route would silently lose its shape
    r = filled.client.patch(
        "/databases/acme/metadata-schema",
        json={"add_fields": [{"name": "region", "data_type": "VARCHAR"}]},
        headers=filled.headers(),
    )
    body = r.json()
    assert r.status_code == 200 and body["success"] is True and body["data"]["added_fields"] == ["region"]
    assert body["added_fields"] == ["region"] and body["database"] == body["tenant_id"] == "acme"
    # An enveloped-only route keeps only the envelope.
    listed = filled.client.get("/databases", headers=filled.headers()).json()
    assert set(listed) == {"success", "data", "error", "meta"}
