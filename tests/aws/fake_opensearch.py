"""An in-memory stand-in for an OpenSearch Serverless collection, behind the real opensearch-py stack.

`FakeCollection` evaluates the subset of the REST API and query DSL the OpenSearch adapter sends
(index exists/create, _bulk index without _id, _search with bool/term/terms/multi_match/knn filters,
search_after, _delete_by_query, _count) and answers in OpenSearch's documented response format.
`RecordingAdapter` is a `requests` transport adapter mounted on the client's real
RequestsHttpConnection, so requests are built, serialised and SigV4-signed by the real code; each one
is recorded (method, path, query, JSON body, headers) before it is answered.

Not OpenSearch: the "english" analyser is approximated (lower-case words, Lucene's English stop set,
a light suffix stemmer), BM25 uses Lucene's formula per field with best_fields (max) combination,
knn is exact. Refresh is immediate (AOSS makes writes searchable only after its refresh interval).
Refuses what AOSS VECTORSEARCH refuses: a custom _id on writes and a `refresh` parameter.
"""

from __future__ import annotations

import json
import math
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import requests
from opensearchpy import RequestsHttpConnection
from requests.adapters import BaseAdapter

from ctxstore.adapters.local.keyword_lane import STOPWORDS  # Lucene's English stop set

_WORD = re.compile(r"\w+", re.UNICODE)


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
class FakeCollection:
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"body": ..., "docs": {...}}
    lock: threading.RLock = field(default_factory=threading.RLock)

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, req: Request) -> tuple[int, Any]:
        parts = [p for p in req.path.split("/") if p]
        with self.lock:
            if "refresh" in req.query:
                return 400, _error("illegal_argument_exception", "refresh is not supported on this collection")
            if parts == ["_bulk"] and req.method == "POST":
                return self._bulk(req.body)
            if len(parts) == 1:
                return self._index_op(req.method, parts[0], req.body)
            name, op = parts[0], parts[1]
            if name not in self.indexes:
                return 404, _error("index_not_found_exception", f"no such index [{name}]")
            if op == "_search":
                return 200, self._search(name, req.body or {})
            if op == "_count":
                return 200, {"count": len(self._matching(name, (req.body or {}).get("query"))), "_shards": _SHARDS}
            if op == "_delete_by_query":
                hits = self._matching(name, req.body["query"])
                for doc_id in hits:
                    del self.indexes[name]["docs"][doc_id]
                return 200, {
                    "took": 1,
                    "timed_out": False,
                    "total": len(hits),
                    "deleted": len(hits),
                    "batches": 1,
                    "version_conflicts": 0,
                    "noops": 0,
                    "failures": [],
                }
            if op == "_doc":
                return 400, _error("illegal_argument_exception", "document ID is not supported in create/index")
        return 400, _error("illegal_argument_exception", f"unsupported request {req.method} {req.path}")

    def _index_op(self, method: str, name: str, body: Any) -> tuple[int, Any]:
        if method == "HEAD":
            return (200 if name in self.indexes else 404), None
        if method == "PUT":
            if name in self.indexes:
                return 400, _error("resource_already_exists_exception", f"index [{name}] already exists")
            self.indexes[name] = {"body": body, "docs": {}}
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        return 400, _error("illegal_argument_exception", f"unsupported {method} /{name}")

    def _bulk(self, lines: list[Any]) -> tuple[int, Any]:
        items = []
        for action, doc in zip(lines[::2], lines[1::2], strict=True):
            ((op, meta),) = action.items()
            if op != "index" or "_id" in meta:
                items.append(
                    {
                        op: {
                            "status": 400,
                            "error": _error("illegal_argument_exception", "document ID is not supported")["error"],
                        }
                    }
                )
                continue
            name = meta["_index"]
            if name not in self.indexes:
                items.append({op: {"_index": name, "status": 404, "error": {"type": "index_not_found_exception"}}})
                continue
            doc_id = uuid.uuid4().hex
            self.indexes[name]["docs"][doc_id] = doc
            items.append({op: {"_index": name, "_id": doc_id, "result": "created", "status": 201}})
        errors = any(next(iter(i.values()))["status"] >= 300 for i in items)
        return 200, {"took": 1, "errors": errors, "items": items}

    # -- queries --------------------------------------------------------------------------------

    def _matching(self, name: str, query: Any) -> list[str]:
        docs = self.indexes[name]["docs"]
        return [doc_id for doc_id, doc in docs.items() if self._score(name, query, doc) is not None]

    def _search(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        docs = self.indexes[name]["docs"]
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
        for s, doc_id, key in ordered[: body.get("size", 10)]:
            src = {k: v for k, v in docs[doc_id].items() if k in body["_source"]} if "_source" in body else docs[doc_id]
            hit = {"_index": name, "_id": doc_id, "_score": None if key else s, "_source": src}
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
        docs = [analyse(d.get(f) or "") for d in self.indexes[name]["docs"].values()]
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


def _error(kind: str, reason: str) -> dict[str, Any]:
    return {"error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason}, "status": 400}


class RecordingAdapter(BaseAdapter):
    """A requests transport: records each signed request and answers from a FakeCollection."""

    def __init__(self, collection: FakeCollection) -> None:
        super().__init__()
        self.collection = collection
        self.requests: list[Request] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        url = urlparse(request.url or "")
        raw = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        if url.path.endswith("/_bulk"):
            body: Any = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            body = json.loads(raw) if raw else None
        req = Request(request.method or "", url.path, parse_qs(url.query), body, dict(request.headers))
        self.requests.append(req)
        status, payload = self.collection.handle(req)
        resp = requests.Response()
        resp.status_code = status
        resp._content = b"" if payload is None else json.dumps(payload).encode()
        resp.headers["content-type"] = "application/json"
        resp.request = request
        resp.url = request.url or ""
        return resp

    def close(self) -> None:
        pass


def connection_class(adapter: RecordingAdapter) -> type[RequestsHttpConnection]:
    """opensearch-py's RequestsHttpConnection with the recording adapter mounted on its session."""

    class Recorded(RequestsHttpConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.session.mount("https://", adapter)

    return Recorded
