"""Smoke test of a deployed ctxstore: run it after `sam deploy` (or against `ctxstore serve`).

    uv run python scripts/aws-smoke.py --url <ApiUrl output> --key <csk_... from `ctxstore keys create`>

(or CTXSTORE_URL / CTXSTORE_API_KEY). It creates a throw-away database, ingests one small text, waits until it
is `completed` and a query finds it, deletes it and waits until no query returns it, checks its status is gone,
and deletes the database. One PASS/FAIL line per step; exit code 0 only when every step passed.

What it checks on a real account and the test suite cannot: IAM of each function on the routes it calls, the
state machine and its Lambda tasks, Bedrock embeddings, OpenSearch Serverless indexing and its refresh lag
(a chunk shows up, and goes away, within --visible-timeout), the API Gateway routes (/health, /openapi.json).
Not exercised: overload (503 + Retry-After) and throttling (429); the client retries both, honouring Retry-After.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from ctxstore.client import CtxstoreClient, CtxstoreError


class Smoke:
    def __init__(self) -> None:
        self.failed = False

    def step(self, name: str, fn: Callable[[], str], *, always: bool = False) -> bool:
        """Run one step unless an earlier one failed (or `always`); print PASS/FAIL/SKIP, detail and duration."""
        if self.failed and not always:
            print(f"SKIP {name}", flush=True)
            return False
        started = time.monotonic()
        try:
            detail = fn()
        except (AssertionError, CtxstoreError, httpx.HTTPError) as exc:
            self.failed = True
            print(f"FAIL {name} ({time.monotonic() - started:.1f} s): {exc}", flush=True)
            return False
        print(f"PASS {name} ({time.monotonic() - started:.1f} s){': ' + detail if detail else ''}", flush=True)
        return True


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not within {timeout:g} s")
        time.sleep(interval)


def run(url: str, key: str, *, index_timeout: float, visible_timeout: float) -> bool:
    token = secrets.token_hex(4)
    database = f"smoke-{token}"
    item_id = f"smoke-item-{token}"
    word = f"zebrafinch{token}"  # a word no other document holds: the query finds this item or nothing
    text = f"The smoke test of ctxstore stores the word {word} and then removes it again."
    smoke = Smoke()
    with CtxstoreClient(url, key, database=database, timeout=60.0) as cs:

        def health() -> str:
            answer = cs.health()
            assert answer.get("status") == "ok", answer
            return f"api_version {answer.get('api_version')}"

        def openapi() -> str:
            resp = httpx.get(url.rstrip("/") + "/openapi.json", timeout=30.0)
            assert resp.status_code == 200, f"HTTP {resp.status_code}"
            paths = resp.json().get("paths", {})
            assert "/query" in paths and "/context/ingest" in paths, sorted(paths)[:10]
            return f"{len(paths)} paths"

        def key_works() -> str:
            return f"{len(cs.databases.list())} databases visible to the key"

        def create_database() -> str:
            cs.databases.create(database)
            status = cs.databases.wait_ready(database, timeout=120.0, poll_interval=1.0)
            assert status.ready, f"not ready for ingestion: {status.infra}"
            return database

        def ingest() -> str:
            accepted = cs.ingest_app_items(
                [{"id": item_id, "title": "ctxstore smoke", "type": "note", "content": {"text": text}}]
            )
            assert accepted.success and [r.status for r in accepted.results] == ["queued"], accepted
            return item_id

        def completed() -> str:
            [status] = cs.wait_for([item_id], timeout=index_timeout, poll_interval=2.0)
            assert status.indexing_status == "completed", (
                f"{status.indexing_status} {status.error_code} {status.error_message}"
            )
            return f"{status.chunk_count} chunk(s)"

        def found() -> bool:
            return any(c.id == item_id and word in c.chunk_content for c in cs.query(word).chunks)

        def query_finds_it() -> str:
            wait_until(found, visible_timeout, f"a query returning {item_id}")
            return f"'{word}'"

        def delete_item() -> str:
            result = cs.delete([item_id])
            assert result.deleted_count == 1, result
            return "deleted_count 1"

        def query_no_longer_finds_it() -> str:
            wait_until(lambda: not found(), visible_timeout, f"{item_id} gone from query results")
            [status] = cs.status([item_id])
            assert status.error_code == "FILE_NOT_FOUND", status
            return "status FILE_NOT_FOUND"

        steps: list[tuple[str, Callable[[], str]]] = [
            ("GET /health", health),
            ("GET /openapi.json", openapi),
            ("the API key is accepted (GET /databases)", key_works),
            ("create a database and wait until it is ready", create_database),
            ("ingest one small text", ingest),
            ("indexing reaches completed", completed),
            ("a query finds the text", query_finds_it),
            ("delete the item", delete_item),
            ("no query returns the text any more", query_no_longer_finds_it),
        ]

        def delete_database() -> str:
            if database not in cs.databases.list():
                return "never created"
            cs.databases.delete(database)
            return database

        for name, fn in steps:
            smoke.step(name, fn)
        smoke.step("delete the database (clean-up, runs after a failure too)", delete_database, always=True)
    print("RESULT " + ("FAIL" if smoke.failed else "PASS"), flush=True)
    return not smoke.failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", default=os.environ.get("CTXSTORE_URL", ""), help="API base URL (ApiUrl output)")
    parser.add_argument("--key", default=os.environ.get("CTXSTORE_API_KEY", ""), help="an API key (csk_...)")
    parser.add_argument("--index-timeout", type=float, default=600.0, help="seconds to wait for completed")
    parser.add_argument(
        "--visible-timeout",
        type=float,
        default=180.0,
        help="seconds to wait for a query to see the text, and to stop seeing it (OpenSearch Serverless refreshes "
        "every 60 s)",
    )
    args: Any = parser.parse_args(argv)
    if not args.url or not args.key:
        parser.error("--url and --key (or CTXSTORE_URL and CTXSTORE_API_KEY) are required")
    ok = run(args.url, args.key, index_timeout=args.index_timeout, visible_timeout=args.visible_timeout)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
