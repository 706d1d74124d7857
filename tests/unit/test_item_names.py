"""One name for an item in code (docs/architecture.md, "Names"): a class, function or attribute named for a
"source" in the server's own packages is either on this list, with why it keeps the word, or it is the item
and says so. Parameters and local variables are not checked: the spec's keys (`sources`, `source_type`) flow
through them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "core" / "ctxstore"
# The packages that name the item; adapters, connectors (a provider's own "data sources"), the client (a public
# API mirroring the wire), parsing and observability are not about items.
CHECKED = ("services", "runtime", "pipeline", "mcp", "console", "commands", "http", "domain", "retrieval", "cli")
SOURCE = re.compile(r"(?<![Rr]e)[Ss]ource")  # not "resource"

KEEPS_THE_WORD = {
    # The route handlers' names are their OpenAPI operationIds (FastAPI derives them): wire names.
    ("http/routers/context_items.py", "list_sources"): "operationId list_sources_context_list_post",
    ("http/routers/context_items.py", "delete_sources"): "operationId delete_sources_context_delete",
    # They render the spec's search.SourceInfo, the `sources` of a /query answer.
    ("services/query/service.py", "_sources"): "search.SourceInfo",
    ("services/query/service.py", "source_view"): "search.SourceInfo",
    ("services/query/service.py", "_source_info"): "search.SourceInfo",
    ("services/query/service.py", "_source_type"): "the spec's source_type key",
    # The item graph's node label is `Source`, stored in FalkorDB and Neptune (a rename is a data migration).
    ("services/graphs/item_graph.py", "SourceProps"): "(:Source) node",
    ("services/graphs/item_graph.py", "upsert_source"): "(:Source) node",
    ("services/graphs/item_graph.py", "remove_source"): "(:Source) node",
    ("services/graphs/item_graph.py", "upsert_sources"): "(:Source) nodes of a batch of graph jobs",
    ("services/graphs/item_graph.py", "_source_row"): "one (:Source) node's row of that batch",
    ("services/graphs/graph_rows.py", "source_props"): "(:Source) node",
    ("services/graphs/item_graph.py", "source_entity"): "(:Source) node as a relation end",
    # Other meanings of the word.
    ("retrieval/graph_context.py", "GraphContextSource"): "what graph context comes from",
    ("runtime/observability.py", "state_sources"): "where the metrics read state",
}


def _named(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [
                t.attr
                for t in targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            ]
    return names


def source_names() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for room in CHECKED:
        for path in sorted((PACKAGE / room).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found |= {(rel, name) for name in _named(tree) if SOURCE.search(name)}
    return found


def test_code_names_the_item_item_and_keeps_source_only_where_listed() -> None:
    unexplained = sorted(source_names() - set(KEEPS_THE_WORD))
    assert not unexplained, f"name these for the item (or add why they keep 'source'): {unexplained}"


def test_the_check_sees_a_class_function_and_attribute_named_for_a_source() -> None:
    tree = ast.parse(
        "class SourceService:\n"
        "    def __init__(self):\n        self._sources = 1\n"
        "    def list_sources(self): ...\n"
        "    def resources(self): ...\n"
    )
    assert [n for n in _named(tree) if SOURCE.search(n)] == ["SourceService", "list_sources", "_sources"]
