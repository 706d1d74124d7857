"""The client sends ingest form fields as multipart/form-data (client/transport.py form_fields), and the server's
form reader gets back exactly the fields a urlencoded form carried: JSON unescaped on the wire, no file names."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from starlette.requests import Request

from ctxstore.client.client import CtxstoreClient
from ctxstore.client.transport import Transport

ITEMS = [
    {"id": "t1", "title": "Ticket 1", "type": "ticket", "content": {"text": 'VPN "broken" & 100% down; ü + ✓'}},
    {"id": "t2", "title": "Ticket 2", "type": "ticket", "content": {"text": "line one\r\nline two=3?"}},
]


def _server_form(request: httpx.Request) -> dict[str, Any]:
    """What Starlette's Request.form() (the API's form reader) makes of the request."""
    body = request.read()
    headers = [(k.lower().encode(), v.encode()) for k, v in request.headers.items()]

    async def read() -> dict[str, Any]:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        scope = {"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""}
        form = await Request(scope, receive).form()
        return dict(form.multi_items())

    return asyncio.run(read())


def test_app_items_go_as_multipart_fields_the_server_reads_unchanged() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        data = {"success": True, "success_count": 2, "failed_count": 0, "results": []}
        return httpx.Response(202, json={"success": True, "data": data, "error": None})

    http = httpx.Client(base_url="http://fake", transport=httpx.MockTransport(handle))
    client = CtxstoreClient("http://fake", "key", database="db", transport=Transport("http://fake", "key", http=http))
    client.ingest_app_items(ITEMS, collection="team")
    [request] = seen
    assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert json.dumps(ITEMS).encode() in request.read()  # raw JSON on the wire, not percent-encoded
    assert b"filename=" not in request.read()
    form = _server_form(request)
    assert all(isinstance(v, str) for v in form.values())  # text fields, not uploads
    assert json.loads(form["app_knowledge"]) == ITEMS
    assert form["database"] == "db" and form["collection"] == "team" and form["type"] == "knowledge"
