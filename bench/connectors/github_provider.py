"""DIAGNOSTIC (in-process, provider level): the GitHub provider through githubkit against the loopback fake.

    uv run python -m bench.connectors.github_provider [--issues 2000] [--comments-per-issue 2]

Not the connector benchmark (that one drives `ctxstore serve` over HTTP, fake to searchable): this times
only the provider half, fake -> githubkit -> mapped objects, for the 2,000-issue repository. Reference in
the same run: the same list pages fetched with bare http.client + json.loads (the fake's own serving cost
and the wire), so `provider / reference` is what githubkit, keyset paging and mapping add.
Writes bench/results/connectors_github_provider.json and prints a table.
"""

from __future__ import annotations

import argparse
import http.client
import json
import time
from pathlib import Path
from typing import Any

from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_seed import seed_large_repo

from ctxstore.connectors.github.provider import build_provider
from ctxstore.connectors.github.sync import PER_PAGE, iso
from ctxstore.ports.connector_provider import Checkpoint, KnownObject, ProviderContext, SyncedObject, SyncRequest

ROOT = Path(__file__).resolve().parents[2]
REPO, TOKEN = "bench/big", "ghp_bench"


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def timed_sync(
    ctx: ProviderContext, checkpoint: dict[str, Any] | None, start: float, known: list[KnownObject]
) -> tuple[float, int, dict[str, Any]]:
    t0 = time.perf_counter()
    count, state = 0, None
    for event in build_provider().sync(ctx, SyncRequest(REPO, "repo", checkpoint, start)):
        if isinstance(event, SyncedObject):
            count += 1
            known.append(KnownObject(event.native_id, event.thread_native_id, event.created_at))
        elif isinstance(event, Checkpoint):
            state = event.state
    assert state is not None
    return time.perf_counter() - t0, count, state


def raw_fetch(fake: FakeGitHub, start: float) -> tuple[float, int]:
    """Every page of the three lists by offset, bare http.client: the reference."""
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=60)
    headers = {"Authorization": f"token {TOKEN}", "Accept": "application/vnd.github+json"}
    t0, count = time.perf_counter(), 0
    for path, extra in (("/issues", "&state=all"), ("/issues/comments", ""), ("/pulls/comments", "")):
        page = 1
        while True:
            query = f"?since={iso(start)}&sort=updated&direction=asc&per_page={PER_PAGE}&page={page}{extra}"
            conn.request("GET", f"/repos/{REPO}{path}{query}", headers=headers)
            items = json.loads(conn.getresponse().read())
            count += len(items)
            if len(items) < PER_PAGE:
                break
            page += 1
    return time.perf_counter() - t0, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--issues", type=int, default=2000)
    parser.add_argument("--comments-per-issue", type=int, default=2)
    args = parser.parse_args()
    with FakeGitHub() as fake:
        seed_large_repo(fake, REPO, issues=args.issues, comments_per_issue=args.comments_per_issue, owner_token=TOKEN)
        ctx = ProviderContext(
            credentials={"api_token": TOKEN}, auth_type="api_token", base_url=fake.base_url, now=fake.clock
        )
        start = fake.now - 30 * 86400
        build_provider().account(ctx)  # a connector is created first: githubkit is imported by then
        load_before = load1()
        ref_s, ref_n = raw_fetch(fake, start)
        fake.clear_requests()
        known: list[KnownObject] = []
        first_s, first_n, state = timed_sync(ctx, None, start, known)
        first_requests = len(fake.calls())
        fake.clear_requests()
        second_s, second_n, state = timed_sync(ctx, state, start, [])
        second_requests = len(fake.calls())
        fake.clear_requests()
        idle_s, idle_n, state = timed_sync(ctx, state, start, [])
        idle = fake.calls()
        fake.clear_requests()
        t0 = time.perf_counter()
        request = SyncRequest(REPO, "repo", None, start)
        listed = len(list(build_provider().reconcile(ctx, request, since=None, known=known) or []))
        reconcile_s, reconcile_requests = time.perf_counter() - t0, len(fake.calls())
        result = {
            "what": "DIAGNOSTIC in-process: GitHub provider (githubkit) against the loopback fake, no ctxstore serve",
            "issues": args.issues,
            "objects": first_n,
            "reference_raw_fetch": {"seconds": round(ref_s, 3), "objects_per_s": round(ref_n / ref_s)},
            "first_sync": {
                "seconds": round(first_s, 3),
                "objects_per_s": round(first_n / first_s),
                "requests": first_requests,
                "ratio_to_reference": round(first_s / ref_s, 2),
            },
            "second_sync_overlap_reread": {
                "seconds": round(second_s, 3),
                "objects": second_n,
                "requests": second_requests,
            },
            "idle_sync": {
                "seconds": round(idle_s, 3),
                "objects": idle_n,
                "requests": len(idle),
                "not_modified_304": sum(1 for c in idle if c.status == 304),
            },
            "reconcile_all": {"seconds": round(reconcile_s, 3), "ids": listed, "requests": reconcile_requests},
            "load1_before": load_before,
            "load1_after": load1(),
        }
    out = ROOT / "bench" / "results" / "connectors_github_provider.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
