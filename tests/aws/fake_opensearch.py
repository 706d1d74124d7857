"""A strict in-memory stand-in for a Classic OpenSearch Serverless VECTORSEARCH collection, behind the real
opensearch-py stack.

`FakeCollection` evaluates the subset of the REST API and query DSL the OpenSearch adapter sends
(index exists/create/_mapping, _bulk `index` without _id and `delete` by _id, _search with
bool/term/terms/multi_match/knn filters, search_after, _count) and answers in OpenSearch's documented
response format. `RecordingAdapter` is a `requests` transport adapter mounted on the client's real
RequestsHttpConnection, so requests are built, serialised and SigV4-signed by the real code; each one
is recorded (method, path, query, JSON body, headers) before it is answered.

Strict where AWS's supported-operations table and the vector search limitations are (AWS-FACTS.md §2):
- `_delete_by_query` and `_update_by_query` answer 404 (as AOSS was seen to), never a "deleted" count;
- a custom `_id` on a write is refused: `_bulk` index/create/update actions with `_id` fail per item with
  400, and PUT/POST `<index>/_doc/<id>`, `_create/<id>`, `_update/<id>` answer 400;
- the `refresh` parameter on any request and the `_refresh` API are refused (400);
- scripts (a `script` anywhere in a body, `_scripts`) are refused (400);
- writes are not read-your-writes: a document (and a delete) shows in `_search`/`_count` only
  `refresh_delay` seconds after it was written, on the collection's `clock` (a `FakeClock` a test
  advances). `_bulk` delete by `_id` is realtime for the id itself: a second delete answers not_found.

Not OpenSearch: the "english" analyser is approximated (lower-case words, Lucene's English stop set,
a light suffix stemmer), BM25 uses Lucene's formula per field with best_fields (max) combination,
knn is exact.
"""

from __future__ import annotations

import json
import math
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import requests
from opensearchpy import RequestsHttpConnection
from requests.adapters import BaseAdapter

from ctxstore.adapters.local.keyword_lane import STOPWORDS  # Lucene's English stop set

_WORD = re.compile(r"\w+", re.UNICODE)
NO_CUSTOM_ID = "Document ID is not supported in create/index operation request"


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def analyse(text: str) -> list[tuple[int, str]]:
    """(position, term) pairs; stop words keep their positions (phrases span them like Lucene's)."""
    return [(i, stem(w)) for i, w in enumerate(_WORD.findall(text.lower())) if w not in STOPWORDS]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]


@dataclass
class FakeClock:
    """Seconds on a clock only a test moves."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Stored:
    source: dict[str, Any]
    visible_at: float  # searches see the document from here on
    gone_at: float | None = None  # ... and no longer from here on (deleted)

    def seen(self, now: float) -> bool:
        return self.visible_at <= now and (self.gone_at is None or now < self.gone_at)


def _has_script(body: Any) -> bool:
    if isinstance(body, dict):
        return any(k in ("script", "script_score", "script_fields") or _has_script(v) for k, v in body.items())
    if isinstance(body, list):
        return any(_has_script(v) for v in body)
    return False


@dataclass
class FakeCollection:
    refresh_delay: float = 0.0  # AOSS Classic vector collections: 60 s
    clock: Callable[[], float] = field(default_factory=FakeClock)
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"body": ..., "docs": {id: Stored}}
    lock: threading.RLock = field(default_factory=threading.RLock)

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, req: Request) -> tuple[int, Any]:
        parts = [p for p in req.path.split("/") if p]
        with self.lock:
            if "refresh" in req.query or "_refresh" in parts:
                return 400, _error("illegal_argument_exception", "refresh is not supported on this collection")
            if "_scripts" in parts or _has_script(req.body):
                return 400, _error("illegal_argument_exception", "scripts are not supported on this collection")
            if any(p in ("_delete_by_query", "_update_by_query") for p in parts):
                return 404, _error("resource_not_found_exception", f"no handler for {req.method} {req.path}", 404)
            if parts == ["_bulk"] and req.method == "POST":
                return self._bulk(req.body)
            if len(parts) == 1:
                return self._index_op(req.method, parts[0], req.body)
            name, op = parts[0], parts[1]
            if op in ("_doc", "_create", "_update") and len(parts) > 2:
                if req.method == "DELETE" and op == "_doc":
                    return self._delete_doc(name, parts[2])
                return 400, _error("illegal_argument_exception", NO_CUSTOM_ID)
            if name not in self.indexes:
                return 404, _error("index_not_found_exception", f"no such index [{name}]", 404)
            if op == "_search":
                return 200, self._search(name, req.body or {})
            if op == "_count":
                return 200, {"count": len(self._matching(name, (req.body or {}).get("query"))), "_shards": _SHARDS}
            if op == "_mapping" and req.method == "PUT":
                props = self.indexes[name]["body"]["mappings"]["properties"]
                for f, spec in (req.body or {}).get("properties", {}).items():
                    if f in props and props[f] != spec:
                        return 400, _error("illegal_argument_exception", f"mapper [{f}] cannot be changed")
                    props[f] = spec
                return 200, {"acknowledged": True}
        return 400, _error("illegal_argument_exception", f"unsupported request {req.method} {req.path}")

    def _index_op(self, method: str, name: str, body: Any) -> tuple[int, Any]:
        if method == "HEAD":
            return (200 if name in self.indexes else 404), None
        if method == "PUT":
            if name in self.indexes:
                return 400, _error("resource_already_exists_exception", f"index [{name}] already exists")
            self.indexes[name] = {"body": json.loads(json.dumps(body)), "docs": {}}
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        return 400, _error("illegal_argument_exception", f"unsupported {method} /{name}")

    def _visible_at(self) -> float:
        return self.clock() + self.refresh_delay

    def _delete_doc(self, name: str, doc_id: str) -> tuple[int, Any]:
        status, result = self._delete(name, doc_id)
        return status, {"_index": name, "_id": doc_id, "result": result}

    def _delete(self, name: str, doc_id: str) -> tuple[int, str]:
        stored = self.indexes.get(name, {}).get("docs", {}).get(doc_id)
        if stored is None or stored.gone_at is not None:
            return 404, "not_found"
        stored.gone_at = self._visible_at()  # searches keep seeing it until the next refresh
        return 200, "deleted"

    def _bulk(self, lines: list[Any]) -> tuple[int, Any]:
        items: list[dict[str, Any]] = []
        rows = iter(lines)
        for action in rows:
            ((op, meta),) = action.items()
            name = meta.get("_index")
            if op == "delete":
                if name not in self.indexes:
                    items.append(
                        {
                            op: {
                                "_index": name,
                                "status": 404,
                                "error": _error("index_not_found_exception", name)["error"],
                            }
                        }
                    )
                    continue
                status, result = self._delete(name, meta["_id"])
                items.append({op: {"_index": name, "_id": meta["_id"], "result": result, "status": status}})
                continue
            doc = next(rows)
            if op not in ("index", "create") or "_id" in meta:
                items.append(
                    {
                        op: {
                            "_index": name,
                            "status": 400,
                            "error": _error("illegal_argument_exception", NO_CUSTOM_ID)["error"],
                        }
                    }
                )
                continue
            if name not in self.indexes:
                items.append(
                    {op: {"_index": name, "status": 404, "error": _error("index_not_found_exception", name)["error"]}}
                )
                continue
            unknown = set(doc) - set(self.indexes[name]["body"]["mappings"]["properties"])
            if unknown:  # dynamic: strict
                reason = f"mapping set to strict, dynamic introduction of [{sorted(unknown)[0]}] is not allowed"
                items.append(
                    {
                        op: {
                            "_index": name,
                            "status": 400,
                            "error": _error("strict_dynamic_mapping_exception", reason)["error"],
                        }
                    }
                )
                continue
            doc_id = uuid.uuid4().hex
            self.indexes[name]["docs"][doc_id] = Stored(doc, self._visible_at())
            items.append({op: {"_index": name, "_id": doc_id, "result": "created", "status": 201}})
        # A not_found delete is not an error in a bulk answer (OpenSearch sets `errors` only for failures).
        errors = any("error" in next(iter(i.values())) for i in items)
        return 200, {"took": 1, "errors": errors, "items": items}

    def live(self, name: str) -> dict[str, dict[str, Any]]:
        """The documents a search sees now: id -> source."""
        now = self.clock()
        return {i: s.source for i, s in self.indexes[name]["docs"].items() if s.seen(now)}

    def stored(self, name: str) -> dict[str, dict[str, Any]]:
        """Every document not deleted, visible or not yet: id -> source (what a refresh would show)."""
        return {i: s.source for i, s in self.indexes[name]["docs"].items() if s.gone_at is None}

    # -- queries --------------------------------------------------------------------------------

    def _matching(self, name: str, query: Any) -> list[str]:
        return [doc_id for doc_id, doc in self.live(name).items() if self._score(name, query, doc) is not None]

    def _search(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        docs = self.live(name)
        scored = [
            (s, doc_id) for doc_id, doc in docs.items() if (s := self._score(name, body.get("query"), doc)) is not None
        ]
        if "sort" in body:
            keys = [next(iter(k)) for k in body["sort"]]
            rows = sorted(([docs[d].get(k) for k in keys], s, d) for s, d in scored)
            if "search_after" in body:
                rows = [r for r in rows if r[0] > body["search_after"]]
            ordered = [(s, d, key) for key, s, d in rows]
        else:
            ordered = [(s, d, None) for s, d in sorted(scored, key=lambda t: -t[0])]
        if "knn" in (body.get("query") or {}):
            (spec,) = body["query"]["knn"].values()
            ordered = ordered[: spec["k"]]
        hits = []
        wanted = body.get("_source", True)
        for s, doc_id, key in ordered[: body.get("size", 10)]:
            hit: dict[str, Any] = {"_index": name, "_id": doc_id, "_score": None if key else s}
            if wanted is True:
                hit["_source"] = docs[doc_id]
            elif wanted:
                hit["_source"] = {k: v for k, v in docs[doc_id].items() if k in wanted}
            if key is not None:
                hit["sort"] = key
            hits.append(hit)
        return {
            "took": 1,
            "timed_out": False,
            "_shards": _SHARDS,
            "hits": {"total": {"value": len(ordered), "relation": "eq"}, "max_score": None, "hits": hits},
        }

    def _score(self, name: str, query: Any, doc: dict[str, Any]) -> float | None:
        """None when the document does not match; otherwise its score."""
        if query is None or "match_all" in query:
            return 1.0
        ((kind, spec),) = query.items()
        if kind == "term":
            ((f, v),) = spec.items()
            return 0.0 if _has(doc.get(f), [v]) else None
        if kind == "terms":
            ((f, vs),) = spec.items()
            return 0.0 if _has(doc.get(f), vs) else None
        if kind == "bool":
            total = 0.0
            for clause in spec.get("filter", []) + spec.get("must", []):
                s = self._score(name, clause, doc)
                if s is None:
                    return None
                total += s
            return total
        if kind == "multi_match":
            return self._multi_match(name, spec, doc)
        if kind == "knn":
            ((f, knn),) = spec.items()
            if doc.get(f) is None or ("filter" in knn and self._score(name, knn["filter"], doc) is None):
                return None
            ip = float(np.dot(np.asarray(doc[f], dtype=np.float32), np.asarray(knn["vector"], dtype=np.float32)))
            return ip + 1.0 if ip > 0 else 1.0 / (1.0 - ip)  # the innerproduct space's documented score
        raise AssertionError(f"query clause {kind} is not part of the adapter's subset")

    def _multi_match(self, name: str, spec: dict[str, Any], doc: dict[str, Any]) -> float | None:
        terms = analyse(spec["query"])
        if not terms:
            return None
        best: float | None = None
        for f in spec["fields"]:
            field_name, _, boost = f.partition("^")
            s = self._field_score(name, field_name, doc, terms, spec)
            if s is not None:
                s *= float(boost or 1)
                best = s if best is None else max(best, s)
        return best

    def _field_score(
        self, name: str, f: str, doc: dict[str, Any], q: list[tuple[int, str]], spec: dict[str, Any]
    ) -> float | None:
        tokens = analyse(doc.get(f) or "")
        words = [t for _, t in tokens]
        qterms = [t for _, t in q]
        if spec.get("type") == "phrase":
            positions = {(p, t) for p, t in tokens}
            start = q[0][0]
            if not any(all((p0 + qp - start, t) in positions for qp, t in q) for p0, _ in tokens):
                return None
        elif spec.get("operator", "or") == "and":
            if not all(t in words for t in qterms):
                return None
        elif not any(t in words for t in qterms):
            return None
        # Lucene BM25 over this field in this index (k1 1.2, b 0.75).
        docs = [analyse(d.get(f) or "") for d in self.live(name).values()]
        n = len(docs)
        avg = sum(len(d) for d in docs) / n if n else 1.0
        score = 0.0
        for t in dict.fromkeys(qterms):
            df = sum(1 for d in docs if any(x == t for _, x in d))
            tf = words.count(t)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / max(avg, 1e-9)))
        return score


def _has(value: Any, wanted: list[Any]) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(v in values for v in wanted if v is not None)


_SHARDS = {"total": 1, "successful": 1, "skipped": 0, "failed": 0}


def _error(kind: str, reason: str, status: int = 400) -> dict[str, Any]:
    return {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": status,
    }


class RecordingAdapter(BaseAdapter):
    """A requests transport: records each signed request and answers from a FakeCollection."""

    def __init__(self, collection: FakeCollection) -> None:
        super().__init__()
        self.collection = collection
        self.requests: list[Request] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        url = urlparse(request.url or "")
        raw = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        if url.path.endswith("/_bulk") and raw:
            body: Any = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            body = json.loads(raw) if raw else None
        req = Request(request.method or "", url.path, parse_qs(url.query), body, dict(request.headers))
        self.requests.append(req)
        status, payload = self.collection.handle(req)
        return json_response(request, status, b"" if payload is None else json.dumps(payload).encode())

    def close(self) -> None:
        pass


def json_response(request: requests.PreparedRequest, status: int, content: bytes) -> requests.Response:
    """The response a transport adapter hands back to opensearch-py's requests session."""
    resp = requests.Response()
    resp.status_code = status
    resp._content = content
    resp.headers["content-type"] = "application/json"
    resp.request = request
    resp.url = request.url or ""
    return resp


def connection_class(adapter: BaseAdapter) -> type[RequestsHttpConnection]:
    """opensearch-py's RequestsHttpConnection with a transport adapter (recording, or remote) mounted on its session."""

    class Recorded(RequestsHttpConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.session.mount("https://", adapter)

    return Recorded
