"""Text the console derives from answers: highlighted matches, copy-as snippets, graph elements."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup, escape

from ctxstore.domain.stopwords import ENGLISH_STOPWORDS as STOPWORDS

_WORD = re.compile(r"[\w][\w'-]*", re.UNICODE)
KEY_PLACEHOLDER = "$CTXSTORE_API_KEY"  # snippets never carry a key


def query_terms(query: str) -> list[str]:
    terms = {w.casefold() for w in _WORD.findall(query) if len(w) > 1 and w.casefold() not in STOPWORDS}
    return sorted(terms, key=len, reverse=True)


def highlight(text: str, terms: list[str]) -> Markup:
    """The text, escaped, with every whole-word match of a query term in <mark>."""
    if not terms:
        return escape(text)
    pattern = re.compile(r"\b(" + "|".join(re.escape(t) for t in terms) + r")\b", re.IGNORECASE)
    out: list[str] = []
    last = 0
    for m in pattern.finditer(text):
        out.append(str(escape(text[last : m.start()])))
        out.append(f"<mark>{escape(m.group(0))}</mark>")
        last = m.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


def as_curl(api_base: str, path: str, body: dict[str, Any]) -> str:
    payload = json.dumps(body, indent=2, ensure_ascii=False)
    return (
        f"curl -s -X POST {shlex.quote(api_base + path)} \\\n"
        f'  -H "Authorization: Bearer {KEY_PLACEHOLDER}" \\\n'
        "  -H 'API-Version: 2' -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(payload)}"
    )


def as_python(api_base: str, path: str, body: dict[str, Any]) -> str:
    payload = json.dumps(body, indent=4, ensure_ascii=False)
    payload = payload.replace(": true", ": True").replace(": false", ": False").replace(": null", ": None")
    return (
        "import os\n\nimport httpx\n\n"
        "response = httpx.post(\n"
        f"    {api_base + path!r},\n"
        '    headers={"Authorization": f"Bearer {os.environ[\'CTXSTORE_API_KEY\']}", "API-Version": "2"},\n'
        f"    json={payload.replace(chr(10), chr(10) + '    ')},\n"
        "    timeout=60,\n"
        ")\n"
        "response.raise_for_status()\n"
        'for chunk in response.json()["data"]["chunks"]:\n'
        '    print(chunk["relevancy_score"], chunk["source_title"], chunk["chunk_content"][:80])\n'
    )


def item_of_chunk(chunk_id: str) -> str:
    """Chunk ids are `<item id>#<position>-<digest>` (domain/chunking.py)."""
    return chunk_id.rsplit("#", 1)[0] if "#" in chunk_id else ""


def relation_elements(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cytoscape elements for relation groups (entities as nodes, one edge per source/target pair)."""
    nodes: dict[str, dict[str, Any]] = {}
    edges: list[dict[str, Any]] = []
    for i, g in enumerate(groups):
        ends = []
        for end in (g["source"], g["target"]):
            eid = str(end.get("entity_id") or end.get("name"))
            node: dict[str, Any] = {"id": eid, "label": end.get("name") or eid, "kind": end.get("type") or "entity"}
            if end.get("type") == "SOURCE":  # an item itself: its node opens the item
                node.update(kind="seed", item=eid)
            nodes.setdefault(eid, {"data": node})
            ends.append(eid)
        evidence = g.get("relations") or []
        predicates = list(dict.fromkeys(str(e.get("canonical_predicate") or e.get("raw_predicate")) for e in evidence))
        chunk = next((str(e.get("chunk_id")) for e in evidence if e.get("chunk_id")), str(g.get("chunk_id") or ""))
        edges.append(
            {
                "data": {
                    "id": f"e{i}",
                    "source": ends[0],
                    "target": ends[1],
                    "label": ", ".join(p for p in predicates if p),
                    "context": str(evidence[0].get("context") or "") if evidence else "",
                    "item": item_of_chunk(chunk),
                }
            }
        )
    return [*nodes.values(), *edges]


def subgraph_elements(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Cytoscape elements for an item subgraph: items as nodes, item-level links as edges."""
    nodes = [
        {
            "data": {
                "id": m["source_id"],
                "label": m.get("title") or m["source_id"],
                "kind": "seed" if m.get("depth") == 0 else "item",
                "item": m["source_id"],
                "depth": m.get("depth"),
            }
        }
        for m in data.get("sources", [])
    ]
    known = {n["data"]["id"] for n in nodes}
    edges: list[dict[str, Any]] = []
    for i, g in enumerate(data.get("relations", [])):
        s, t = str(g["source"].get("entity_id")), str(g["target"].get("entity_id"))
        if s in known and t in known:
            label = ", ".join(
                dict.fromkeys(
                    str(e.get("canonical_predicate") or e.get("raw_predicate")) for e in g.get("relations", [])
                )
            )
            edges.append({"data": {"id": f"e{i}", "source": s, "target": t, "label": label}})
    return [*nodes, *edges]


def byog_elements(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes, relationships and paths found in BYOG rows, as Cytoscape elements (empty when none)."""
    nodes: dict[str, dict[str, Any]] = {}
    edges: dict[str, dict[str, Any]] = {}

    def visit(v: Any) -> None:
        if isinstance(v, dict):
            if "labels" in v and "id" in v:
                nid = f"n{v['id']}"
                name = v.get("name") or v.get("title") or (v["labels"][0] if v["labels"] else nid)
                nodes[nid] = {"data": {"id": nid, "label": str(name), "kind": ",".join(v["labels"])}}
            elif "relation" in v and "source_node_id" in v:
                edges[f"r{v['id']}"] = {
                    "data": {
                        "id": f"r{v['id']}",
                        "source": f"n{v['source_node_id']}",
                        "target": f"n{v['target_node_id']}",
                        "label": str(v["relation"]),
                    }
                }
            elif "nodes" in v and "edges" in v:
                for x in [*v["nodes"], *v["edges"]]:
                    visit(x)
        elif isinstance(v, list):
            for x in v:
                visit(x)

    for row in rows:
        for value in row.values():
            visit(value)
    for e in list(edges.values()):  # an edge whose ends were not returned still shows, with bare ends
        for end in (e["data"]["source"], e["data"]["target"]):
            nodes.setdefault(end, {"data": {"id": end, "label": end, "kind": "node"}})
    return [*nodes.values(), *edges.values()] if nodes else []
