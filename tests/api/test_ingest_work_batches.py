"""The Step Functions tasks' work files (pipeline/ingest_steps.py): one object per Embed batch, a manifest,
bounded upserts, and work written by the previous layout (one chunks.json) still read."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ctxstore.pipeline import ingest_steps as steps_module
from ctxstore.pipeline.ingest_steps import MANIFEST, ingest_steps
from ctxstore.pipeline.publish_groups import bounded_batches, doc_bytes
from ctxstore.ports.search_index import ChunkDoc
from tests.support.app import LocalApp

TEXT = "\n\n".join(f"## Part {i}\n\n" + f"Paragraph {i} tells of the tide tables. " * 40 for i in range(12))


def _doc(i: int, text: str = "x") -> ChunkDoc:
    return ChunkDoc(f"c{i}", "i", "db", "", "knowledge", text, np.zeros(384, dtype=np.float32), position=i)


def test_bounded_batches_cap_count_and_bytes_and_keep_order() -> None:
    docs = [_doc(i) for i in range(1200)]
    groups = list(bounded_batches(docs, max_docs=500, max_bytes=10**9))
    assert [len(g) for g in groups] == [500, 500, 200] and [d for g in groups for d in g] == docs
    heavy = [_doc(i, "y" * 100_000) for i in range(10)]
    groups = list(bounded_batches(heavy, max_docs=500, max_bytes=350_000))
    assert [len(g) for g in groups] == [3, 3, 3, 1]
    assert all(sum(doc_bytes(d) for d in g) <= 350_000 for g in groups)
    assert [len(g) for g in bounded_batches([_doc(0, "z" * 500_000)], max_bytes=1000)] == [1]  # alone, not lost


def _start(local: LocalApp) -> dict[str, Any]:
    local.create_ready_database("acme")
    items = [{"id": "n1", "title": "Tides", "type": "note", "content": {"text": TEXT}}]
    r = local.client.post(
        "/context/ingest", data={"database": "acme", "app_knowledge": json.dumps(items)}, headers=local.headers()
    )
    assert r.status_code == 202, r.text
    [job] = local.container.queue.claim("ingest", lease_s=60)
    return {"org": job.org, "payload": job.payload}


def test_each_batch_is_its_own_object_and_index_streams_them(local: LocalApp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps_module, "WORK_BATCH", 4)
    event = _start(local)
    steps = ingest_steps(local.services)
    parsed = steps.parse(event)
    n, work = parsed["chunks"], parsed["work"]
    assert n > 8 and [b["start"] for b in parsed["batches"]] == list(range(0, n, 4))
    blobs = local.container.blobs
    assert json.loads(blobs.get(event["org"], work + MANIFEST)) == {"chunks": n, "batch_size": 4, "inferred": False}
    sizes = [len(json.loads(blobs.get(event["org"], f"{work}chunks/{b['start']:08d}.json"))) for b in parsed["batches"]]
    assert sum(sizes) == n and max(sizes) == 4
    assert not blobs.exists(event["org"], work + "chunks.json")
    for batch in parsed["batches"]:
        steps.embed({**event, "work": work, "batch": batch})
    assert steps.index({**event, "work": work}) == {"outcome": "continue", "chunks": n}
    idx = local.container.search_index
    assert idx is not None and len(idx.item_chunks(event["org"], "acme", "", "knowledge", "n1")) == n


def test_work_written_as_one_chunks_json_is_still_read(local: LocalApp) -> None:
    """An execution in flight across a deploy: its Parse wrote the old layout (batches of 64, no manifest)."""
    event = _start(local)
    steps = ingest_steps(local.services)
    parsed = steps.parse(event)
    org, work, n = event["org"], parsed["work"], parsed["chunks"]
    rows = [
        r
        for b in parsed["batches"]
        for r in json.loads(local.container.blobs.get(org, f"{work}chunks/{b['start']:08d}.json"))
    ]
    local.container.blobs.delete_prefix(org, work)
    local.container.blobs.put(org, work + "chunks.json", json.dumps(rows).encode())
    steps.embed({**event, "work": work, "batch": {"start": 0, "end": n}})
    assert steps.index({**event, "work": work}) == {"outcome": "continue", "chunks": n}
    assert "relations" in steps.graph({**event, "work": work})  # reads the same legacy file
    idx = local.container.search_index
    assert idx is not None and len(idx.item_chunks(org, "acme", "", "knowledge", "n1")) == n
