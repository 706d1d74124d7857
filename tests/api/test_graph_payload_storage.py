"""Where a graph_payload lives (services/graphs/payloads.py): a blob next to the version that brought it, with a
small reference record; the same code path as on AWS (tests/aws/test_large_uploads.py has it at the limits)."""

from __future__ import annotations

import json
from typing import Any

from ctxstore.domain.items import ItemRef
from ctxstore.ports.records import Put
from ctxstore.services.items.service import GRAPH_PAYLOAD
from tests.api.test_relations import PAYLOAD, TEXT, ingest, relations, triples
from tests.support.app import LocalApp

ORG = "default"
REF = ItemRef("acme", "", "knowledge", "d1")
ITEMS = [{"id": "d1", "title": "T", "type": "note", "content": {"text": TEXT}}]


def _reference(la: LocalApp) -> dict[str, Any]:
    rec = la.container.records.get(ORG, GRAPH_PAYLOAD, REF.pk, REF.item_id)
    assert rec is not None
    return dict(rec.data)


def _triples(la: LocalApp) -> set[tuple[str, str, str]]:
    r = relations(la)
    assert r.status_code == 200, r.text
    return triples(r.json()["data"])


def test_the_payload_is_a_blob_kept_across_reingests_replaced_by_a_new_one_and_deleted_with_the_item(
    local: LocalApp,
) -> None:
    local.create_ready_database("acme")
    ingest(local, ITEMS, {"d1": PAYLOAD})
    first = _reference(local)
    assert first["entities"] == 3 and first["relations"] == 2 and set(first) == {"blob_key", "entities", "relations"}
    assert json.loads(local.container.blobs.get(ORG, first["blob_key"])) == PAYLOAD
    assert ("Ada Lovelace", "works_at", "Acme Corp") in _triples(local)

    ingest(local, ITEMS)  # no payload: the stored one is applied again (spec: it persists across re-ingest)
    assert _reference(local) == first and local.container.blobs.exists(ORG, first["blob_key"])
    assert ("Ada Lovelace", "works_at", "Acme Corp") in _triples(local)

    smaller = {"entities": PAYLOAD["entities"], "relations": PAYLOAD["relations"][1:]}
    ingest(local, ITEMS, {"d1": smaller})
    second = _reference(local)
    assert second["blob_key"] != first["blob_key"] and second["relations"] == 1
    assert not local.container.blobs.exists(ORG, first["blob_key"]), "the replaced payload's blob is deleted"
    found = _triples(local)
    assert ("Ada Lovelace", "advises", "Babbage Ltd") in found
    assert ("Ada Lovelace", "works_at", "Acme Corp") not in found

    body = {"database": "acme", "ids": ["d1"], "type": "knowledge"}
    r = local.client.request("DELETE", "/context", json=body, headers=local.headers())
    assert r.status_code == 200, r.text
    assert not local.container.blobs.exists(ORG, second["blob_key"])
    assert local.container.records.get(ORG, GRAPH_PAYLOAD, REF.pk, REF.item_id) is None


def test_an_inline_payload_record_written_before_blobs_still_feeds_the_graph_step(local: LocalApp) -> None:
    local.create_ready_database("acme")
    local.container.records.put(ORG, Put(GRAPH_PAYLOAD, REF.pk, REF.item_id, PAYLOAD))
    ingest(local, ITEMS)
    assert ("Ada Lovelace", "works_at", "Acme Corp") in _triples(local)
