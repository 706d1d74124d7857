"""Issue 12 item 5: overload gets fast, enveloped 503s with Retry-After; nothing is dropped; health answers.

A real `ctxstore serve` with one query slot and a short wait: 40 concurrent queries must all get an HTTP
answer, each either 200 or 503 SERVICE_UNAVAILABLE with Retry-After, refusals quick (queue full at once,
or after the configured wait), and /health stays answerable throughout.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from tests.support.server import ServerProcess


async def _storm(base: str, key: str, n: int) -> list[tuple[int, float, str, dict[str, str]]]:
    headers = {"Authorization": f"Bearer {key}", "API-Version": "2"}
    limits = httpx.Limits(max_connections=n + 5, max_keepalive_connections=n + 5)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30, limits=limits) as client:

        async def one(i: int) -> tuple[int, float, str, dict[str, str]]:
            started = time.monotonic()
            r = await client.post(
                "/query", json={"database": "ov", "query": f"overload probe {i} words", "mode": "thinking"}
            )
            code = r.json()["error"]["code"] if r.status_code != 200 else ""
            return r.status_code, time.monotonic() - started, code, dict(r.headers)

        async def health() -> list[int]:
            codes = []
            for _ in range(10):
                codes.append((await client.get("/health")).status_code)
                await asyncio.sleep(0.02)
            return codes

        results, health_codes = await asyncio.gather(asyncio.gather(*(one(i) for i in range(n))), health())
        assert set(health_codes) == {200}
        return list(results)


def test_overload_is_refused_fast_with_retry_after_and_nothing_is_dropped(tmp_path: Path) -> None:
    env = {"CTXSTORE_MAX_INFLIGHT_QUERIES": "1", "CTXSTORE_ADMISSION_WAIT_S": "0.3"}
    with ServerProcess(tmp_path / "data", env=env) as srv:
        srv.wait_ready()
        [key] = srv.printed_keys
        with srv.client(key) as c:
            assert c.post("/databases", json={"database": "ov"}).status_code == 202
            deadline = time.time() + 30
            while not c.get("/databases/status", params={"database": "ov"}).json()["data"]["infra"][
                "ready_for_ingestion"
            ]:
                assert time.time() < deadline
                time.sleep(0.05)
        results = asyncio.run(_storm(srv.base_url, key, 40))
    assert len(results) == 40  # every request got an HTTP answer (an exception would have failed the gather)
    ok = [r for r in results if r[0] == 200]
    refused = [r for r in results if r[0] != 200]
    assert ok, "some requests must be served"
    assert refused, "one slot and a queue of 8 cannot take 40 at once"
    for status, seconds, code, headers in refused:
        assert status == 503 and code == "SERVICE_UNAVAILABLE"
        assert int(headers["retry-after"]) >= 1
        assert seconds < 5, seconds  # refused at once (queue full) or after the 0.3 s wait, plus scheduling
    assert any("refused (request_id=" in line for line in srv.lines)  # each refusal is logged, one line
