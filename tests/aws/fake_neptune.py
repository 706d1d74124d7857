"""A Neptune Analytics ExecuteQuery endpoint answered by the local FalkorDB engine (moto has no neptune-graph).

Used by tests/aws/test_neptune_graph.py (the adapter under the relations and subgraph API suites) and by the
graph port's contract suite (tests/contract/test_graph_contract.py).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from ctxstore.adapters.aws.neptune_dialect import check
from ctxstore.ports.graph import GraphEdge, GraphNode, GraphPath, GraphQueryError, GraphTimeout


class FakeNeptune:
    """ExecuteQuery of a real boto3 neptune-graph client (the adapter's own config) answered by FalkorDB,
    one physical graph per Neptune graph id, in Neptune's JSON format: a botocore ``before-send`` hook, so
    request serialisation, error parsing and botocore's retries are the real ones.

    Like Neptune, it refuses (ValidationException, MALFORMED_QUERY) a query that uses what Neptune documents
    as unsupported (``neptune_dialect.check``), and it records every call (query, parameters, timeout).
    ``lose_answer_once(marker)``: the next query containing ``marker`` runs, then its answer is lost (a read
    timeout), so botocore re-sends it, as it would on AWS.
    """

    def __init__(self, engine: Any, *clients: Any) -> None:
        self.engine = engine
        self.calls: list[Call] = []
        self._lose: set[str] = set()
        for client in {id(c): c for c in clients}.values():
            wait_s = float(client.meta.config.read_timeout)
            client.meta.events.register(
                "before-send.neptune-graph.ExecuteQuery", functools.partial(self._answer, client_wait_s=wait_s)
            )

    @contextlib.contextmanager
    def meant_to_be_refused(self) -> Iterator[None]:
        """Queries sent inside are refused on purpose: kept out of RECORDED (the module's final check)."""
        size = len(RECORDED)
        yield
        del RECORDED[size:]

    def lose_answer_once(self, marker: str) -> None:
        self._lose.add(marker)

    def queries(self, marker: str) -> list[str]:
        return [c.query for c in self.calls if marker in c.query]

    def _answer(self, request: Any, client_wait_s: float, **_: Any) -> AWSResponse:
        body = json.loads(request.body)
        target = request.headers["graphIdentifier"]
        target = target.decode() if isinstance(target, bytes) else target
        query, params, timeout = body["query"], body.get("parameters") or {}, body.get("queryTimeoutMilliseconds")
        self.calls.append(Call(query, params, timeout, client_wait_s))
        RECORDED.append((query, params))
        findings = check(query, params)
        if findings:
            return error_response("ValidationException", str(findings[0]), "MALFORMED_QUERY")
        try:
            res = self.engine.query("_neptune", target, query, params or None, timeout_ms=timeout)
        except GraphTimeout as exc:  # Neptune: UnprocessableException with reason QUERY_TIMEOUT
            return error_response("UnprocessableException", str(exc), "QUERY_TIMEOUT")
        except GraphQueryError as exc:
            return error_response("ValidationException", str(exc), "MALFORMED_QUERY")
        lost = next((m for m in self._lose if m in query), None)
        if lost is not None:
            self._lose.discard(lost)
            raise ReadTimeoutError(endpoint_url=request.url)  # the write ran; its answer never arrived
        rows = [{c: _neptune_json(v) for c, v in zip(res.columns, row, strict=True)} for row in res.rows]
        return _response(200, {"results": rows}, {})


@dataclass(frozen=True)
class Call:
    query: str
    params: dict[str, Any]
    timeout_ms: int | None  # queryTimeoutMilliseconds sent
    client_wait_s: float  # the read timeout of the client that sent it


RECORDED: list[tuple[str, dict[str, Any]]] = []  # every ExecuteQuery any FakeNeptune answered


class _Raw(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        while chunk := self.read(8192):
            yield chunk


def _response(status: int, body: dict[str, Any], headers: dict[str, str]) -> AWSResponse:
    data = json.dumps(body).encode()
    return AWSResponse(
        "https://neptune.test/queries",
        status,
        {**headers, "content-length": str(len(data))},  # type: ignore[arg-type]
        _Raw(data),
    )


def error_response(code: str, message: str, reason: str, status: int = 400) -> AWSResponse:
    return _response(status, {"message": message, "reason": reason}, {"x-amzn-ErrorType": code})


def _neptune_json(v: Any) -> Any:
    if isinstance(v, GraphNode):
        return {"~id": f"n{v.id}", "~entityType": "node", "~labels": v.labels, "~properties": v.properties}
    if isinstance(v, GraphEdge):
        return {
            "~id": f"e{v.id}",
            "~entityType": "relationship",
            "~start": f"n{v.source_node_id}",
            "~end": f"n{v.target_node_id}",
            "~type": v.relation,
            "~properties": v.properties,
        }
    if isinstance(v, GraphPath):
        out: list[Any] = [_neptune_json(v.nodes[0])]
        for e, n in zip(v.edges, v.nodes[1:], strict=True):
            out += [_neptune_json(e), _neptune_json(n)]
        return out
    if isinstance(v, list):
        return [_neptune_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _neptune_json(x) for k, x in v.items()}
    return v
