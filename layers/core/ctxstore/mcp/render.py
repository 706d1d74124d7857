"""Compact text an agent can read and quote: ranked results with source titles and ids, never raw envelopes."""

from __future__ import annotations

import json
from typing import Any

from ctxstore.mcp.backend import Scope

CHUNK_CHARS = 2000  # one chunk is shorter than this in practice; the cap keeps an odd one from flooding context
MAX_GRAPH_LINES = 12


def _where(scope: Scope) -> str:
    col = f'collection "{scope.collection}"' if scope.collection else "the default collection"
    return f'database "{scope.database}", {col}'


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " […]"


def _entity(e: dict[str, Any]) -> str:
    kind = e.get("type")
    return f"{e.get('name', '?')} ({kind})" if kind else str(e.get("name", "?"))


def _triplet_lines(groups: list[dict[str, Any]], seen: set[tuple[str, str, str]]) -> list[str]:
    lines: list[str] = []
    for group in groups:
        for t in group.get("triplets", []):
            rel = t.get("relation") or {}
            src, dst = t.get("source") or {}, t.get("target") or {}
            predicate = str(rel.get("canonical_predicate") or rel.get("predicate") or "related_to")
            key = (str(src.get("name")), predicate, str(dst.get("name")))
            if key in seen:
                continue
            seen.add(key)
            context = rel.get("context") or group.get("combined_context") or ""
            line = f"- {_entity(src)} --{predicate}--> {_entity(dst)}"
            lines.append(line + (f': "{_clip(str(context), 200)}"' if context else ""))
    return lines


def query(scope: Scope, data: dict[str, Any]) -> str:
    chunks: list[dict[str, Any]] = data.get("chunks") or []
    sources: list[dict[str, Any]] = data.get("sources") or []
    plan = data.get("query_plan") or {}
    if not chunks:
        return (
            f"No results in {_where(scope)}. Empty results are not errors: the items may still be indexing "
            "(check ctxstore_status), the filters may be too narrow, or the content is in another database, "
            "collection or store (try type=all)."
        )
    head = f"{len(chunks)} results from {len(sources)} sources in {_where(scope)}"
    if plan.get("mode"):
        head += f" (route {plan['mode']})"
    lines = [head + ", best first:"]
    for i, c in enumerate(chunks, 1):
        score = c.get("relevancy_score")
        title = c.get("source_title") or "(untitled)"
        meta = [
            f"score {score:.2f}" if isinstance(score, int | float) else None,
            f'"{title}"',
            f"source_id={c.get('id')}",
        ]
        meta.append(str(c.get("type") or ""))
        lines.append(f"[{i}] " + " | ".join(m for m in meta if m))
        lines.append(_clip(str(c.get("chunk_content") or ""), CHUNK_CHARS))
    extra: dict[str, Any] = data.get("additional_context") or {}
    if extra:
        lines.append("Related context (linked sources and neighbouring chunks):")
        for c in list(extra.values())[:10]:
            lines.append(f'- "{c.get("source_title") or "(untitled)"}" source_id={c.get("id")}: ')
            lines[-1] += _clip(str(c.get("chunk_content") or ""), 600)
    graph = data.get("graph_context") or {}
    seen: set[tuple[str, str, str]] = set()
    facts = _triplet_lines(graph.get("chunk_relations") or [], seen) + _triplet_lines(
        graph.get("query_paths") or [], seen
    )
    if facts:
        lines.append("Graph context (entity relations behind these results):")
        lines.extend(facts[:MAX_GRAPH_LINES])
    return "\n".join(lines)


def ingest(scope: Scope, data: dict[str, Any]) -> str:
    results: list[dict[str, Any]] = data.get("results") or []
    queued = [r for r in results if r.get("status") == "queued"]
    lines = [f"Accepted {len(queued)} of {len(results)} item(s) into {_where(scope)}; indexing runs in the background."]
    for r in results:
        label = r.get("title") or r.get("filename") or ""
        name = f' "{label}"' if label else ""
        if r.get("status") == "queued":
            lines.append(f"- id={r.get('id')}{name}: queued")
        else:
            lines.append(
                f"- {name.strip() or r.get('id')}: failed {r.get('error_code') or ''} {r.get('error') or ''}".rstrip()
            )
    if queued:
        ids = json.dumps([r.get("id") for r in queued])
        lines.append(
            f"Poll ctxstore_status with ids={ids}: searchable from graph_creation, done at completed (or errored)."
        )
    return "\n".join(lines)


def status(entries: list[dict[str, Any]]) -> str:
    lines = []
    for s in entries:
        state = s.get("indexing_status")
        if state is None:
            lines.append(
                f"- {s.get('id')}: not found (FILE_NOT_FOUND: never ingested here, rejected at upload, or deleted)"
            )
        elif state == "errored":
            lines.append(
                f"- {s.get('id')}: errored {s.get('error_code') or ''}: {s.get('error_message') or ''}".rstrip(": ")
            )
        else:
            chunks = s.get("chunk_count")
            lines.append(f"- {s.get('id')}: {state}" + (f" ({chunks} chunks)" if chunks else ""))
    pending = sum(1 for s in entries if s.get("indexing_status") in ("queued", "processing", "graph_creation"))
    lines.append(f"{pending} still in progress." if pending else "All done.")
    return "\n".join(lines)


def listing(scope: Scope, store: str, data: dict[str, Any]) -> str:
    items: list[dict[str, Any]] = data.get("sources") or []
    pages = data.get("pagination") or {}
    kind = "memories" if store == "memory" else "knowledge sources"
    head = f"{data.get('total', len(items))} {kind} in {_where(scope)}"
    if pages:
        head += f"; page {pages.get('page')} of {pages.get('total_pages')}, newest first"
    lines = [head + ":"]
    for s in items:
        parts = [f"id={s.get('id')}", f'"{s.get("title") or "(untitled)"}"', str(s.get("indexing_status") or "")]
        if s.get("chunk_count") is not None:
            parts.append(f"{s.get('chunk_count')} chunks")
        parts.append(f"updated {s.get('updated_at') or s.get('created_at') or '?'}")
        lines.append("- " + " | ".join(p for p in parts if p))
    if pages.get("has_next"):
        lines.append(f"More on page {int(pages.get('page', 1)) + 1}.")
    return "\n".join(lines)


def inspected(data: dict[str, Any], offset: int, limit: int) -> str:
    content = str(data.get("content") or "")
    part = content[offset : offset + limit]
    head = (
        f'"{data.get("title") or "(untitled)"}" (source_id={data.get("id")}, {data.get("type")}, '
        f"{data.get('indexing_status')}): characters {offset}-{offset + len(part)} of {len(content)}"
    )
    if offset + len(part) < len(content):
        head += f"; call again with offset={offset + len(part)} for more"
    out = head + ".\n" + part
    inferred = str(data.get("inferred_content") or "")
    if inferred and offset == 0:
        out += "\nInferred from this memory:\n" + inferred
    return out


def deleted(data: dict[str, Any]) -> str:
    results: list[dict[str, Any]] = data.get("results") or []
    done = [r["id"] for r in results if r.get("deleted")]
    missing = [r["id"] for r in results if not r.get("deleted")]
    out = f"Deleted {len(done)} of {len(results)}" + (f": {', '.join(done)}" if done else "") + "."
    if missing:
        out += f" Not found (nothing deleted): {', '.join(missing)}."
    return out


def relations(data: dict[str, Any]) -> str:
    groups: list[dict[str, Any]] = data.get("relations") or []
    if not groups:
        return "No relations found (relations are complete once an item's status is completed)."
    lines = [f"{len(groups)} related entity pairs, strongest first:"]
    for g in groups:
        src, dst = g.get("source") or {}, g.get("target") or {}
        for ev in (g.get("relations") or [])[:3]:
            predicate = ev.get("canonical_predicate") or ev.get("raw_predicate") or "related_to"
            line = f"- {_entity(src)} --{predicate}--> {_entity(dst)}"
            if ev.get("confidence") is not None:
                line += f" [confidence {float(ev['confidence']):.2f}]"
            if ev.get("context"):
                line += f': "{_clip(str(ev["context"]), 200)}"'
            lines.append(line)
    if data.get("is_truncated"):
        lines.append("More relations exist; raise `limit` to see them.")
    return "\n".join(lines)


def subgraph(data: dict[str, Any]) -> str:
    members: list[dict[str, Any]] = data.get("sources") or []
    if not members:
        return "No such item (or nothing visible): the subgraph is empty."
    lines = [f"{len(members)} linked items, breadth first from {data.get('seed_source_id')}:"]
    for m in members:
        line = f'- depth {m.get("depth")}: source_id={m.get("source_id")} "{m.get("title") or "(untitled)"}"'
        if m.get("discovered_via"):
            line += f" ({m.get('discovered_relation')} of {m.get('discovered_via')})"
        lines.append(line)
    if data.get("is_truncated"):
        lines.append("Truncated: raise max_sources or depth for more.")
    return "\n".join(lines)


def rows(result: list[dict[str, Any]], max_rows: int) -> str:
    if not result:
        return "0 rows."
    shown = result[:max_rows]
    lines = [
        f"{len(result)} rows"
        + (f" (first {len(shown)} shown; raise max_rows or paginate)" if len(shown) < len(result) else "")
        + ":"
    ]
    lines.extend(json.dumps(r, ensure_ascii=False, default=str) for r in shown)
    return "\n".join(lines)


def databases(names: list[str], states: dict[str, str], failed: list[dict[str, Any]], default: str | None) -> str:
    if not names and not failed:
        if default:
            return f'No databases yet. The connection\'s default "{default}": create it with ctxstore_create_database.'
        return "No databases yet: create one with ctxstore_create_database."
    lines = [f"{len(names)} databases:"]
    for n in names:
        marks = [states[n]] if n in states else []
        if n == default:
            marks.append("the connection's default")
        lines.append(f"- {n}" + (f" ({', '.join(marks)})" if marks else ""))
    lines += [f"- {f.get('database')} (failed: {f.get('error') or 'provisioning failed'})" for f in failed]
    if default and default not in names:
        lines.append(
            f'The connection\'s default "{default}" does not exist yet: create it with ctxstore_create_database.'
        )
    return "\n".join(lines)


def created_database(name: str, status: str, *, is_default: bool) -> str:
    where = "" if is_default else f' (pass database="{name}" to the other tools, or make it the connection\'s default)'
    if status == "ready":
        tools = "ctxstore_ingest or ctxstore_ingest_document"
        return f'Database "{name}" created and ready: add content with {tools}{where}.'
    return (
        f'Database "{name}" created; still {status}. It accepts content once ready: check with '
        f"ctxstore_list_databases{where}."
    )
