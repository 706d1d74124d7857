"""Verbs on stored context: query, status, list, inspect, delete, relations, subgraph."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxstore.commands import exit_codes
from ctxstore.commands.common import (
    CollectionOpt,
    DatabaseOpt,
    KindOpt,
    OutputOpt,
    Refused,
    StoreKind,
    YesOpt,
    confirm,
    connect,
)
from ctxstore.commands.output import Output

if TYPE_CHECKING:
    from ctxstore.client.models import InspectResult, ItemStatus, ListedSource, QueryResult, SourcePage

SNIPPET = 160


class QueryType(StrEnum):
    all = "all"
    knowledge = "knowledge"
    memory = "memory"


class Mode(StrEnum):
    auto = "auto"
    fast = "fast"
    thinking = "thinking"


class QueryBy(StrEnum):
    hybrid = "hybrid"
    text = "text"


def _snippet(text: str, limit: int = SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _when(iso: str | None) -> str:
    """An API timestamp as `2026-11-26 23:40` (minutes are enough in a table; `-o json` has the rest)."""
    return (iso or "")[:16].replace("T", " ")


def _filters(values: list[str]) -> dict[str, Any]:
    """`key=value` pairs: top-level keys are schema fields; `additional_metadata.key=value` is free-form."""
    out: dict[str, Any] = {}
    for raw in values:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise Refused(
                f"filter '{raw}' is not key=value",
                hint="e.g. --filter team=sales --filter additional_metadata.owner=ann",
            )
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            parsed = value
        if key.startswith("additional_metadata."):
            out.setdefault("additional_metadata", {})[key.removeprefix("additional_metadata.")] = parsed
        else:
            out[key] = parsed
    return out


def status_exit(statuses: list[ItemStatus]) -> int:
    if any(s.indexing_status == "errored" for s in statuses):
        return exit_codes.PARTIAL
    if any(not s.found for s in statuses):
        return exit_codes.NOT_FOUND
    return exit_codes.OK


def show_statuses(out: Output, statuses: list[ItemStatus]) -> None:
    if out.json:
        out.data([s.raw() for s in statuses])
        return
    rows = [
        (
            s.id,
            s.indexing_status or "not found",
            s.chunk_count if s.found else "",
            s.error_code or "",
            s.error_message or "",
        )
        for s in statuses
    ]
    out.table(None, ["id", "status", "chunks", "error code", "error"], rows)


def _show_query(out: Output, result: QueryResult) -> None:
    if out.json:
        out.data(result.raw())
        return
    if not result.chunks:
        out.note("No results. Items may still be indexing (`ctxstore status`), or live in another scope or store.")
        return
    rows = [
        (
            i,
            f"{c.relevancy_score:.3f}" if c.relevancy_score is not None else "",
            c.source_title,
            c.id,
            c.type,
            _snippet(c.chunk_content),
        )
        for i, c in enumerate(result.chunks, 1)
    ]
    plan = result.query_plan or {}
    out.table(
        f"{len(result.chunks)} results (route {plan.get('mode', '?')})",
        ["#", "score", "source", "id", "store", "text"],
        rows,
        truncate=("source",),
    )
    graph_rows = [
        (
            t["source"].get("name"),
            t["relation"].get("canonical_predicate"),
            t["target"].get("name"),
            _snippet(t["relation"].get("context") or "", 120),
        )
        for g in (result.graph_context or {}).get("chunk_relations", [])
        for t in g.get("triplets", [])
    ]
    if graph_rows:
        out.table("graph context", ["source", "relation", "target", "context"], graph_rows)


def _show_listing(out: Output, listed: SourcePage, items: list[ListedSource], store: str, all_pages: bool) -> None:
    if out.json:
        out.data({"total": listed.total, "sources": [s.raw() for s in items], "pagination": listed.pagination})
        return
    rows = [(s.id, s.title, s.type, s.indexing_status, s.chunk_count, _when(s.updated_at)) for s in items]
    pages = listed.pagination
    title = f"{listed.total} {store} items" + (
        "" if all_pages else f", page {pages.get('page')} of {pages.get('total_pages')}"
    )
    out.table(title, ["id", "title", "kind", "status", "chunks", "updated"], rows, truncate=("title",))


def _show_item(out: Output, item: InspectResult, *, full: bool, url: bool) -> None:
    facts = [
        ("id", item.id),
        ("title", item.title),
        ("kind", item.type),
        ("status", item.indexing_status),
        ("content type", item.content_type),
        ("size", item.size_bytes),
    ]
    if url:
        facts.append(("download", item.presigned_url))
    out.table(None, ["field", "value"], facts)
    content = item.content or ""
    out.line(
        content
        if full or len(content) <= 2000
        else content[:2000] + f"\n… ({len(content) - 2000} more characters: --full)"
    )
    if item.inferred_content:
        out.line("Inferred:\n" + item.inferred_content)


def register(app: typer.Typer) -> None:
    @app.command()
    def query(
        ctx: typer.Context,
        text: Annotated[str, typer.Argument(help="What to find.")],
        type: Annotated[
            QueryType, typer.Option("--type", "-t", help="Store: knowledge, memory or all.")
        ] = QueryType.all,
        mode: Annotated[
            Mode, typer.Option("--mode", "-m", help="fast, thinking, or auto (picks per query).")
        ] = Mode.auto,
        max_results: Annotated[int, typer.Option("--max-results", "-n", min=1, max=100, help="Chunks to return.")] = 10,
        query_by: Annotated[
            QueryBy, typer.Option(help="hybrid (meaning + keywords) or text (keywords only).")
        ] = QueryBy.hybrid,
        phrase: Annotated[bool, typer.Option(help="With --query-by text: match the exact phrase.")] = False,
        filter: Annotated[
            list[str] | None, typer.Option("--filter", "-f", help="Exact-match filter key=value (repeatable).")
        ] = None,
        graph: Annotated[bool, typer.Option("--graph/--no-graph", help="Include graph context.")] = True,
        alpha: Annotated[
            float | None, typer.Option(min=0.0, max=1.0, help="0 keyword ... 1 semantic (default auto).")
        ] = None,
        recency_bias: Annotated[
            float | None, typer.Option(min=0.0, max=1.0, help="Favour recent items (0 off).")
        ] = None,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """Search knowledge and memories: ranked chunks with their sources."""
        with connect(ctx, output, database, collection) as (client, out, _):
            result = client.query(
                text,
                type=type.value,
                mode=mode.value,
                max_results=max_results,
                query_by=query_by.value,
                operator="phrase" if phrase else None,
                metadata_filters=_filters(filter or []) or None,
                graph_context=graph,
                alpha=alpha,
                recency_bias=recency_bias,
            )
            _show_query(out, result)

    @app.command()
    def status(
        ctx: typer.Context,
        ids: Annotated[list[str], typer.Argument(help="Item ids (from ingest).")],
        wait: Annotated[bool, typer.Option(help="Wait until every item is completed, errored or unknown.")] = False,
        timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait.")] = 600.0,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """Indexing status of items. Exit 7 if any errored, 4 if any is unknown, 8 if --wait timed out."""
        with connect(ctx, output, database, collection) as (client, out, _):
            statuses = client.wait_for(ids, timeout=timeout) if wait else client.status(ids)
            show_statuses(out, statuses)
            if wait and not all(s.done for s in statuses):
                raise typer.Exit(exit_codes.TIMEOUT)
            raise typer.Exit(status_exit(statuses))

    @app.command("list")
    def list_(
        ctx: typer.Context,
        type: KindOpt = StoreKind.knowledge,
        page: Annotated[int, typer.Option(min=1, help="Page number.")] = 1,
        page_size: Annotated[int, typer.Option(min=1, max=500, help="Items per page.")] = 50,
        all_pages: Annotated[bool, typer.Option("--all", help="Every page.")] = False,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """Stored sources or memories, newest first."""
        with connect(ctx, output, database, collection) as (client, out, _):
            listed = client.list_sources(type=type.value, page=page, page_size=page_size)
            items = list(listed.sources)
            while all_pages and listed.has_next:
                page += 1
                listed = client.list_sources(type=type.value, page=page, page_size=page_size)
                items.extend(listed.sources)
            _show_listing(out, listed, items, type.value, all_pages)

    @app.command()
    def inspect(
        ctx: typer.Context,
        id: Annotated[str, typer.Argument(help="Source or memory id.")],
        full: Annotated[bool, typer.Option(help="Print all of the content, not the first 2,000 characters.")] = False,
        url: Annotated[bool, typer.Option(help="Also print a time-limited download link.")] = False,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """One item: title, status, size and its text."""
        with connect(ctx, output, database, collection) as (client, out, _):
            item = client.inspect(id, mode="both" if url else "content")
            if out.json:
                out.data(item.raw())
                return
            _show_item(out, item, full=full, url=url)

    @app.command()
    def delete(
        ctx: typer.Context,
        ids: Annotated[list[str], typer.Argument(help="Item ids to delete.")],
        type: KindOpt = StoreKind.knowledge,
        yes: YesOpt = False,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """Delete items for good (text, index, graph share, files). Exit 4 if some id did not exist."""
        with connect(ctx, output, database, collection) as (client, out, _):
            confirm(f"Delete {len(ids)} {type.value} item(s) for good?", yes)
            result = client.delete(ids, type=type.value)
            if out.json:
                out.data(result.raw())
            else:
                out.table(
                    f"{result.deleted_count} of {len(result.results)} deleted",
                    ["id", "deleted", "error"],
                    [(r["id"], r["deleted"], r.get("error")) for r in result.results],
                )
            raise typer.Exit(exit_codes.OK if result.deleted_count == len(result.results) else exit_codes.NOT_FOUND)

    @app.command()
    def relations(
        ctx: typer.Context,
        id: Annotated[str | None, typer.Argument(help="One item's relations; omit for the whole collection's.")] = None,
        type: KindOpt = StoreKind.knowledge,
        limit: Annotated[int, typer.Option(min=1, max=10000, help="Most entity pairs.")] = 50,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """Entity relations extracted from stored text, strongest first."""
        with connect(ctx, output, database, collection) as (client, out, _):
            rel = client.relations(id, type=type.value, limit=limit)
            if out.json:
                out.data(rel.raw())
                return
            rows = [
                (
                    g["source"].get("name"),
                    ev.get("canonical_predicate"),
                    g["target"].get("name"),
                    ev.get("confidence"),
                    _snippet(ev.get("context") or "", 120),
                )
                for g in rel.relations
                for ev in g.get("relations", [])[:1]
            ]
            out.table(
                f"{len(rel.relations)} entity pairs" + (" (more: raise --limit)" if rel.is_truncated else ""),
                ["source", "relation", "target", "confidence", "context"],
                rows,
            )

    @app.command()
    def subgraph(
        ctx: typer.Context,
        id: Annotated[str, typer.Argument(help="Item to start from.")],
        type: KindOpt = StoreKind.knowledge,
        depth: Annotated[int, typer.Option(min=1, max=10, help="Most hops.")] = 5,
        max_sources: Annotated[int, typer.Option(min=1, max=1000, help="Most items.")] = 200,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """Items linked to one item (thread, parent/child, explicit links), nearest first."""
        with connect(ctx, output, database, collection) as (client, out, _):
            sub = client.subgraph(id, type=type.value, depth=depth, max_sources=max_sources)
            if out.json:
                out.data(sub.raw())
                return
            rows = [
                (m.depth, m.source_id, m.title, m.discovered_relation or "", m.discovered_via or "")
                for m in sub.sources
            ]
            out.table(
                f"{len(sub.sources)} linked items" + (" (truncated)" if sub.is_truncated else ""),
                ["depth", "id", "title", "relation", "via"],
                rows,
            )
