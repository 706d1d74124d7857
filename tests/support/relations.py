"""Notes ingested with a caller-supplied relation (`graph_payload`), for tests of the graph context of a query."""

from __future__ import annotations

import json

from tests.support.app import LocalApp

PEOPLE = {
    "ada": {"name": "Ada Lovelace", "type": "PERSON", "namespace": "people"},
    "charles": {"name": "Charles Babbage", "type": "PERSON", "namespace": "people"},
    "engine": {"name": "Analytical Engine", "type": "MACHINE", "namespace": "things"},
}


def ingest_related_note(
    app: LocalApp, item_id: str, text: str, relation: tuple[str, str, str], *, collection: str | None = None
) -> None:
    """One note of database `acme` whose graph payload relates two of PEOPLE: (source, target, predicate)."""
    source, target, predicate = relation
    payload = {
        item_id: {
            "entities": PEOPLE,
            "relations": [{"source": source, "target": target, "predicate": predicate, "context": text}],
        }
    }
    form = {
        "database": "acme",
        "app_knowledge": json.dumps([{"id": item_id, "title": item_id, "type": "note", "content": {"text": text}}]),
        "graph_payload": json.dumps(payload),
    }
    if collection is not None:
        form["collection"] = collection
    r = app.client.post("/context/ingest", headers=app.headers(), data=form)
    assert r.status_code == 202, r.text
