"""Connector benchmark: objects/s from a provider fake to searchable, and the scheduler's overhead.

Drives a real `ctxstore serve` over HTTP, its provider SDK pointed at a loopback fake (tests/fakes):
1. throughput: a seeded workspace is configured in one connector (Slack: 10,000 messages in 20 channels,
   every 10th with 3 replies; GitHub: a 2,000-issue repository, every 5th a pull request, 2 comments each,
   the fake's `seed_large_repo`; Gmail: 2,000 messages in 10 labels, threads of a root and 3 replies);
   measured from the configure call to every object dispatched, every item
   searchable (`graph_creation`/`completed`) and every item completed. Reference in the same run: the bare
   local embedder (in-process, labelled) on the same texts, one text per call as the server embeds them.
2. scheduler overhead: N connectors (1,000) each with one resource that has nothing new; the server's CPU
   while none is due against the same server before any connector existed, and the rate of no-op sync
   cycles once all are due at once, against the bare SDK calls those cycles make (in the bench process).

Workloads are pluggable (WORKLOADS): a provider adds one with its fake, seed and connector body.
Notion: a shared page tree of N pages (20 sub-pages per page, a heading, a paragraph and two bullets each),
one page resource; its first sync crawls the tree (a pages.retrieve and a blocks.children call per page).
Linear: a workspace of 4 teams whose issues have 2 comments each (a thread: a comment and its reply), 1/3 issues.
    uv run python -m bench.connectors.run [--workload slack|github|linear|notion|gmail] [--objects N]
        [--connectors 1000]
(`--objects`: Slack messages, 10,000 by default; GitHub issues, 2,000; Notion pages, 1,000; Linear objects,
3,000; Gmail messages, 2,000.)
Writes bench/results/connectors.json (one key per workload) and prints a report. Record the 1-min load average:
absolute numbers drift on a shared machine; read the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_seed import seed_large_repo
from tests.fakes.gmail_api import BOB, OWNER, FakeGmail, compose
from tests.fakes.linear_api import FakeLinear
from tests.fakes.linear_seed import seed_bulk
from tests.fakes.slack_api import VOCABULARY, FakeSlack
from tests.support.connectors import connector_env, fast_scheduler_env, ready_database, wait_for
from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "connectors.json"
DB = "bench"


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Workload:
    """One provider's side of the benchmark."""

    name: str
    provider: str
    fake: Callable[[], Any]  # a started fake server (context manager)
    env: Callable[[Any], dict[str, str]]  # serve settings pointing the provider SDK at the fake
    seed: Callable[[Any, int], tuple[list[str], list[str]]]  # -> (resource ids, the objects' texts)
    credentials: Callable[[Any, str], dict[str, Any]]  # a credential set for a connector with this scope
    add_idle_resource: Callable[[Any, int], str]  # a resource with nothing new (scheduler part)
    bare_calls: Callable[[Any, str], float]  # seconds for the provider calls of one no-op cycle, in-process
    provider_calls: Callable[[Any], int]  # provider API calls the fake has answered so far
    default_objects: int  # the seed's size when --objects is not given


def _slack_seed(fake: FakeSlack, objects: int) -> tuple[list[str], list[str]]:
    fake.seed_workspace(channels=20, messages=objects, thread_every=10, replies_per_thread=3)
    texts = [m.text for ch in fake.channels.values() for m in ch.messages.values()]
    return sorted(fake.channels), texts


def _slack_credentials(fake: FakeSlack, scope: str) -> dict[str, Any]:
    return {"access_token": fake.add_token(f"xoxb-bench-{scope}")}


def _slack_idle(fake: FakeSlack, i: int) -> str:
    ch = fake.add_channel(f"CIDLE{i:05d}", f"idle-{i}")
    fake.post(ch.id, "a quiet channel", at=time.time() - 9 * 86400)  # outside the 7-day window
    return ch.id


def _slack_bare_calls(fake: FakeSlack, channel: str) -> float:
    """The two conversations.history calls a no-op cycle makes (incremental pass + reconcile), bare SDK."""
    from slack_sdk import WebClient

    client = WebClient(token=fake.add_token("xoxb-bench-bare"), base_url=fake.base_url)
    t0 = time.perf_counter()
    for _ in range(2):
        client.conversations_history(channel=channel, oldest=f"{time.time() - 7 * 86400:.6f}", limit=200)
    return time.perf_counter() - t0


GITHUB_REPO, GITHUB_LOGIN = "bench/big", "bench"


def _github_seed(fake: FakeGitHub, issues: int) -> tuple[list[str], list[str]]:
    """The 2,000-issue repository of the fake's seed, over the last 25 days (inside lookback_days 30)."""
    fake.now = int(time.time())
    seed_large_repo(fake, GITHUB_REPO, issues=issues, comments_per_issue=2, owner_token="ghp_bench_seed")
    fake.now = max(fake.now, int(time.time()))
    repo = fake.repos[GITHUB_REPO]
    # What the provider indexes (title and body; a comment's body), close enough for the embedder reference.
    texts = [f"{i.title}\n\n{i.body}" for i in repo.issues.values()]
    texts += [f"Comment on {GITHUB_REPO}#{c.issue_number}\n\n{c.body}" for c in repo.comments.values()]
    return [GITHUB_REPO], texts


def _github_credentials(fake: FakeGitHub, scope: str) -> dict[str, Any]:
    return {"api_token": fake.add_token(f"ghp_bench_{scope}", GITHUB_LOGIN)}


def _github_idle(fake: FakeGitHub, i: int) -> str:
    """A repository with one issue filed 9 days ago and nothing since."""
    full_name = f"idle/repo{i:05d}"
    fake.add_repo(full_name, members=[GITHUB_LOGIN])
    now, fake.now = fake.now, int(time.time()) - 9 * 86400
    fake.add_issue(full_name, "a quiet repository", "nothing changes here")
    fake.now = max(now, int(time.time()))
    return full_name


def _github_bare_calls(fake: FakeGitHub, repo: str) -> float:
    """A no-op cycle's provider calls through bare githubkit: the issues list from its cursor minus the 3 h
    overlap (the one issue again) and the two empty comment lists."""
    from githubkit import GitHub

    def since(ts: float) -> dict[str, str | int]:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
        return {"since": when, "sort": "updated", "direction": "asc", "per_page": 100}

    issue_at = max(i.updated_at for i in fake.repos[repo].issues.values())
    calls = [(f"/repos/{repo}/issues", since(issue_at - 3 * 3600))]
    calls += [(f"/repos/{repo}/{p}", since(time.time() - 30 * 86400)) for p in ("issues/comments", "pulls/comments")]
    with GitHub(fake.add_token("ghp_bench_bare", GITHUB_LOGIN), base_url=fake.base_url, http_cache=False) as gh:
        gh.request("GET", calls[0][0], params=calls[0][1])  # client set-up (TLS, connection) is not timed
        t0 = time.perf_counter()
        for path, params in calls:
            gh.request("GET", path, params=params)
        return time.perf_counter() - t0


def _notion_seed(fake: Any, objects: int) -> tuple[list[str], list[str]]:
    from tests.fakes.notion_seed import seed_bulk

    fake.add_token("ntn_bench")
    root, texts = seed_bulk(fake, pages=objects - 1)
    return [root], ["# Bulk Root The root of a large wiki.", *texts]


def _notion_idle(fake: Any, i: int) -> str:
    from tests.fakes.notion_blocks import para

    return str(fake.add_page(f"Idle {i}", [para("a quiet page")], shared=True, at=time.time() - 9 * 86400))


def _notion_bare_calls(fake: Any, page: str) -> float:
    """The calls a no-op cycle of one page resource makes (root check, one search page, reconcile's search),
    with the bare SDK."""
    from notion_client import Client

    client = Client(auth="ntn_bench", base_url=fake.base_url)
    body = {
        "filter": {"property": "object", "value": "page"},
        "page_size": 100,
        "sort": {"timestamp": "last_edited_time", "direction": "descending"},
    }
    t0 = time.perf_counter()
    client.pages.retrieve(page)
    client.search(**body)
    client.search(**body)
    return time.perf_counter() - t0


def _notion_workload() -> Workload:
    from tests.fakes.notion_api import FakeNotion

    return Workload(
        name="notion",
        provider="notion",
        fake=lambda: FakeNotion(),
        env=lambda fake: fake.server_env(CTXSTORE_CONNECTOR_TICK_S="1.0", CTXSTORE_CONNECTOR_MIN_INTERVAL_S="60"),
        seed=_notion_seed,
        credentials=lambda fake, scope: {"access_token": "ntn_bench"},
        add_idle_resource=_notion_idle,
        bare_calls=_notion_bare_calls,
        provider_calls=lambda fake: len(fake.calls),
        default_objects=1_000,
    )


def _linear_seed(fake: FakeLinear, objects: int) -> tuple[list[str], list[str]]:
    teams = seed_bulk(fake, teams=4, issues=max(1, objects // 3), comments_per_issue=2, key="lin_api_bench")
    texts = [f"{i.title}\n\n{i.description}" for i in fake.issues.values()] + [c.body for c in fake.comments.values()]
    return teams, texts


def _linear_credentials(fake: FakeLinear, scope: str) -> dict[str, Any]:
    user = next(iter(fake.users.values()), None) or fake.users[fake.add_user("Bench User")]
    return {"access_token": fake.add_api_key(f"lin_api_bench_{scope}", user.id)}


def _linear_idle(fake: FakeLinear, i: int) -> str:
    team = fake.add_team(f"I{i:04d}", f"idle-{i}")
    fake.add_issue(team, "a quiet team", at=time.time() - 40 * 86400)  # older than lookback_days
    return team


def _linear_bare_calls(fake: FakeLinear, team: str) -> float:
    """The two GraphQL calls a no-op cycle makes (issues and comments changed in the window), bare httpx."""
    from ctxstore.connectors.linear.sync import TEAM_COMMENTS, TEAM_ISSUES, iso_ms

    key = _linear_credentials(fake, "bare")["access_token"]
    now = int(time.time() * 1000)
    variables = {"team": team, "teamId": team, "since": iso_ms(now - 600_000), "until": iso_ms(now), "first": 50}
    with httpx.Client(headers={"Authorization": key}) as client:
        t0 = time.perf_counter()
        for query, op in ((TEAM_ISSUES, "TeamIssues"), (TEAM_COMMENTS, "TeamComments")):
            body = {"query": query, "operationName": op, "variables": {**variables, "after": None}}
            client.post(fake.base_url, json=body).raise_for_status()
        return time.perf_counter() - t0


def _gmail_seed(fake: FakeGmail, objects: int) -> tuple[list[str], list[str]]:
    """`objects` messages in 10 labels, threads of a root and 3 replies, spread over the last 20 days."""
    labels = [fake.add_label(f"Label_{i}", f"bench-{i}").id for i in range(10)]
    texts: list[str] = []
    now, words = time.time(), VOCABULARY
    root = ""
    for i in range(objects):
        text = " ".join(words[(i * 7 + k) % len(words)] for k in range(30)) + f" (message {i})"
        label = labels[(i // 4) % len(labels)]
        reply = i % 4 != 0
        subject = f"{'Re: ' if reply else ''}thread {i // 4} about {words[i % len(words)]}"
        mail = compose(subject=subject, sender=BOB, to=OWNER, text=text, at=now - 20 * 86400 + i * 60)
        mid = fake.deliver(mail, labels=(label,), thread_of=root if reply else None)
        root = root if reply else mid
        texts.append(text)
    return labels, texts


def _gmail_credentials(fake: FakeGmail, scope: str) -> dict[str, Any]:
    fake.add_oauth_client("bench-client", "bench-secret")
    return {
        "access_token": fake.add_token(f"ya29.bench-{scope}"),
        "refresh_token": fake.issue_refresh_token("bench-client"),
        "client_id": "bench-client",
        "client_secret": "bench-secret",
        "expires_at": time.time() + 3500,
    }


def _gmail_idle(fake: FakeGmail, i: int) -> str:
    label = fake.add_label(f"Label_idle{i:05d}", f"idle-{i}").id
    fake.deliver(compose(subject="quiet", sender=BOB, to=OWNER, text="a quiet label"), labels=(label,))
    return label


def _gmail_bare_calls(fake: FakeGmail, label: str) -> float:
    """The one history.list call a no-op cycle makes, bare client library."""
    import google.oauth2.credentials
    import google_auth_httplib2
    import httplib2
    from googleapiclient.discovery import build

    creds = google.oauth2.credentials.Credentials(token=fake.add_token("ya29.bench-bare"))  # type: ignore[no-untyped-call]
    api = build(
        "gmail",
        "v1",
        http=google_auth_httplib2.AuthorizedHttp(creds, http=httplib2.Http(timeout=30)),
        static_discovery=True,
        client_options={"api_endpoint": fake.base_url},
    )
    t0 = time.perf_counter()
    api.users().history().list(userId="me", startHistoryId=str(fake.history_id), labelId=label).execute()
    return time.perf_counter() - t0


def _gmail_env(fake: FakeGmail) -> dict[str, str]:
    return fast_scheduler_env(
        CTXSTORE_CONNECTOR_BASE_URL_GMAIL=fake.base_url,
        CTXSTORE_CONNECTOR_TOKEN_URL_GMAIL=fake.token_url,
        CTXSTORE_CONNECTOR_TICK_S="1.0",
        CTXSTORE_CONNECTOR_MIN_INTERVAL_S="60",
    )


WORKLOADS: dict[str, Workload] = {
    "slack": Workload(
        name="slack",
        provider="slack",
        fake=lambda: FakeSlack(),
        env=lambda fake: connector_env(fake, CTXSTORE_CONNECTOR_TICK_S="1.0", CTXSTORE_CONNECTOR_MIN_INTERVAL_S="60"),
        seed=_slack_seed,
        credentials=_slack_credentials,
        add_idle_resource=_slack_idle,
        bare_calls=_slack_bare_calls,
        provider_calls=lambda fake: len(fake.calls_of("conversations.history")),
        default_objects=10_000,
    ),
    "github": Workload(
        name="github",
        provider="github",
        fake=lambda: FakeGitHub(now=int(time.time())),
        env=lambda fake: connector_env(
            None, fake, CTXSTORE_CONNECTOR_TICK_S="1.0", CTXSTORE_CONNECTOR_MIN_INTERVAL_S="60"
        ),
        seed=_github_seed,
        credentials=_github_credentials,
        add_idle_resource=_github_idle,
        bare_calls=_github_bare_calls,
        provider_calls=lambda fake: len(fake.calls()),
        default_objects=2_000,
    ),
    "notion": _notion_workload(),
    "linear": Workload(
        name="linear",
        provider="linear",
        fake=lambda: FakeLinear(),
        env=lambda fake: fast_scheduler_env(
            CTXSTORE_CONNECTOR_BASE_URL_LINEAR=fake.base_url,
            CTXSTORE_CONNECTOR_TOKEN_URL_LINEAR=fake.token_url,
            CTXSTORE_CONNECTOR_TICK_S="1.0",
            CTXSTORE_CONNECTOR_MIN_INTERVAL_S="60",
        ),
        seed=_linear_seed,
        credentials=_linear_credentials,
        add_idle_resource=_linear_idle,
        bare_calls=_linear_bare_calls,
        provider_calls=lambda fake: len(fake.graphql_calls()),
        default_objects=3_000,
    ),
    "gmail": Workload(
        name="gmail",
        provider="gmail",
        fake=lambda: FakeGmail(),
        env=_gmail_env,
        seed=_gmail_seed,
        credentials=_gmail_credentials,
        add_idle_resource=_gmail_idle,
        bare_calls=_gmail_bare_calls,
        provider_calls=lambda fake: len(fake.calls),
        default_objects=2_000,
    ),
}


@contextlib.contextmanager
def _serve(w: Workload, fake: Any, data_dir: Path) -> Iterator[tuple[ServerProcess, httpx.Client]]:
    with ServerProcess(data_dir, env=w.env(fake)) as srv:
        srv.wait_ready(timeout=120)
        [key] = srv.printed_keys
        with httpx.Client(
            base_url=srv.base_url, timeout=120, headers={"Authorization": f"Bearer {key}", "API-Version": "2"}
        ) as c:
            ready_database(c, DB)
            yield srv, c


def _create(c: httpx.Client, w: Workload, fake: Any, scope: str) -> str:
    body = {"provider": w.provider, "database": DB, "provider_account_scope": scope}
    r = c.post("/connectors", json={**body, "credentials": w.credentials(fake, scope)})
    r.raise_for_status()
    return str(r.json()["data"]["connector_id"])


def embedder_reference(texts: list[str]) -> tuple[float, float]:
    """Reference (in-process, labelled): the bare local embedder on the same texts, one per call as served:
    (texts per second, CPU ms per text)."""
    from ctxstore.adapters.models.local_embedder import LocalEmbedder

    emb = LocalEmbedder()
    emb.embed_documents(texts[:4])
    sample = texts[: min(len(texts), 1500)]
    t0, c0 = time.perf_counter(), time.process_time()
    for t in sample:
        emb.embed_documents([t])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return len(sample) / wall, 1000 * cpu / len(sample)


def throughput(w: Workload, objects: int) -> dict[str, Any]:
    with w.fake() as fake, tempfile.TemporaryDirectory() as tmp:
        resources, texts = w.seed(fake, objects)
        with _serve(w, fake, Path(tmp) / "data") as (srv, c):
            cid = _create(c, w, fake, "TBENCH")
            load_start = loadavg()
            t0 = time.perf_counter()
            r = c.post(f"/connectors/{cid}/configure", json={"resources": [{"resource_id": r} for r in resources]})
            r.raise_for_status()
            cpu0 = cpu_seconds(srv.proc.pid)
            dispatched_at = searchable_at = completed_at = None
            pending: set[str] | None = None
            searchable_left: set[str] = set()
            while completed_at is None and time.perf_counter() - t0 < 3600:
                time.sleep(2.0)
                conn = c.get(f"/connectors/{cid}").json()["data"]
                if (
                    dispatched_at is None
                    and conn["documents_dispatched"] >= len(texts)
                    and conn["sync_status"] == "idle"
                ):
                    dispatched_at = time.perf_counter() - t0
                    listed: list[str] = []
                    page = 1
                    while True:
                        data = c.post("/context/list", json={"database": DB, "page": page, "page_size": 500}).json()[
                            "data"
                        ]
                        listed += [s["id"] for s in data["sources"]]
                        if not data["pagination"]["has_next"]:
                            break
                        page += 1
                    pending, searchable_left = set(listed), set(listed)
                if pending is None:
                    continue
                ids = sorted(pending)
                for s in range(0, len(ids), 200):
                    batch = ids[s : s + 200]
                    got = c.get("/context/status", params={"database": DB, "ids": ",".join(batch)}).json()["data"]
                    for st in got["statuses"]:
                        if st["indexing_status"] in ("graph_creation", "completed"):
                            searchable_left.discard(st["id"])
                        if st["indexing_status"] in ("completed", "errored"):
                            pending.discard(st["id"])
                if searchable_at is None and not searchable_left:
                    searchable_at = time.perf_counter() - t0
                if not pending:
                    completed_at = time.perf_counter() - t0
            server_cpu = cpu_seconds(srv.proc.pid) - cpu0
            conn = c.get(f"/connectors/{cid}").json()["data"]
            provider_calls = w.provider_calls(fake)
        embed_rate, embed_cpu_ms = embedder_reference(texts)
    n = len(texts)
    assert searchable_at and completed_at and dispatched_at
    return {
        "objects": n,
        "resources": len(resources),
        "dispatched_s": round(dispatched_at, 1),
        "searchable_s": round(searchable_at, 1),
        "completed_s": round(completed_at, 1),
        "dispatch_objects_per_s": round(n / dispatched_at, 1),
        "searchable_objects_per_s": round(n / searchable_at, 1),
        "completed_objects_per_s": round(n / completed_at, 1),
        "reference_bare_embedder_texts_per_s": round(embed_rate, 1),
        "ratio_searchable_to_bare_embedder": round((n / searchable_at) / embed_rate, 3),
        "server_cpu_s": round(server_cpu, 1),
        "server_cpu_ms_per_object": round(1000 * server_cpu / n, 1),
        "reference_bare_embedder_cpu_ms_per_text": round(embed_cpu_ms, 2),
        "ratio_server_cpu_per_object_to_embedder_cpu_per_text": round(1000 * server_cpu / n / embed_cpu_ms, 2),
        "documents_dispatched": conn["documents_dispatched"],
        "sync_cycles_completed": conn["sync_cycles_completed"],
        "provider_calls": provider_calls,
        "loadavg_1m_start": load_start,
        "loadavg_1m_end": loadavg(),
    }


def scheduler_overhead(w: Workload, connectors: int) -> dict[str, Any]:
    with w.fake() as fake, tempfile.TemporaryDirectory() as tmp, _serve(w, fake, Path(tmp) / "data") as (srv, c):
        pid = srv.proc.pid
        time.sleep(3)
        cpu, t = cpu_seconds(pid), time.perf_counter()
        time.sleep(20)
        baseline = (cpu_seconds(pid) - cpu) / (time.perf_counter() - t)
        channels = [w.add_idle_resource(fake, i) for i in range(connectors)]
        t_setup = time.perf_counter()
        ids = []
        for i, ch in enumerate(channels):
            cid = _create(c, w, fake, f"TIDLE{i:05d}")
            c.post(f"/connectors/{cid}/configure", json={"resources": [{"resource_id": ch}]}).raise_for_status()
            ids.append(cid)
        setup_s = time.perf_counter() - t_setup

        def cycles() -> list[int]:
            return [x["sync_cycles_completed"] for x in c.get("/connectors").json()["data"]["connectors"]]

        wait_for(lambda: min(cycles()) >= 1, timeout=1800, every=2, what="first cycles")
        for cid in ids:  # none due for an hour: the idle scheduler with N connectors
            c.patch(f"/connectors/{cid}", json={"sync_interval_seconds": 3600})
        time.sleep(3)
        cpu, t = cpu_seconds(pid), time.perf_counter()
        time.sleep(20)
        idle_with = (cpu_seconds(pid) - cpu) / (time.perf_counter() - t)
        time.sleep(max(0.0, 61 - (time.perf_counter() - t_setup - setup_s)))  # every last attempt > 60 s ago
        before = {
            x["connector_id"]: x["sync_cycles_completed"] for x in c.get("/connectors").json()["data"]["connectors"]
        }
        calls0, cpu_due = w.provider_calls(fake), cpu_seconds(pid)
        t_due = time.perf_counter()
        for cid in ids:
            c.patch(f"/connectors/{cid}", json={"sync_interval_seconds": 60})  # re-anchored: due now
        wait_for(lambda: min(cycles()) >= 2, timeout=1800, every=2, what="a due round")
        round_s = time.perf_counter() - t_due
        round_cpu = cpu_seconds(pid) - cpu_due
        after = c.get("/connectors").json()["data"]["connectors"]
        syncs = sum(x["sync_cycles_completed"] - before[x["connector_id"]] for x in after)
        calls = w.provider_calls(fake) - calls0
        durations = sorted(_epoch(x["last_run"]["finished_at"]) - _epoch(x["last_run"]["started_at"]) for x in after)
        bare = sum(w.bare_calls(fake, channels[0]) for _ in range(50)) / 50
        list_t = time.perf_counter()
        c.get("/connectors")
        list_s = time.perf_counter() - list_t
    mean_sync = sum(durations) / len(durations)
    return {
        "connectors": connectors,
        "setup_s_create_and_configure": round(setup_s, 1),
        "server_cpu_idle_without_connectors": round(baseline, 4),
        "server_cpu_idle_with_connectors_not_due": round(idle_with, 4),
        "due_round_s_including_the_patch_requests": round(round_s, 1),
        "due_round_syncs": syncs,
        "due_round_server_cpu_ms_per_sync_upper_bound": round(1000 * round_cpu / syncs, 2),
        "provider_calls_per_sync": round(calls / syncs, 2),
        "noop_sync_ms_mean": round(1000 * mean_sync, 2),
        "noop_sync_ms_p95": round(1000 * durations[int(0.95 * (len(durations) - 1))], 2),
        "reference_bare_provider_calls_per_sync_ms": round(1000 * bare, 2),
        "ratio_noop_sync_to_bare_provider_calls": round(mean_sync / bare, 2),
        "diagnostic_in_process_due_ms_for_1000_due": round(_due_diagnostic(connectors), 2),
        "list_connectors_s": round(list_s, 2),
        "loadavg_1m_end": loadavg(),
    }


def _epoch(ts: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _due_diagnostic(n: int) -> float:
    """In-process, labelled: one scheduler tick that hands out n due schedules (SQLite), in milliseconds."""
    from ctxstore.adapters.local.sqlite_db import SqliteDb
    from ctxstore.adapters.local.sqlite_scheduler import SqliteScheduler

    with tempfile.TemporaryDirectory() as tmp:
        db = SqliteDb(Path(tmp) / "records.db")
        s = SqliteScheduler(db)
        now = time.time()
        for i in range(n):
            s.upsert("org", f"conn_{i}", every_s=3600, next_at=now - 1, payload={"connector_id": f"conn_{i}"})
        t0 = time.perf_counter()
        assert len(s.due(now, limit=n)) == n
        elapsed = time.perf_counter() - t0
        db.close()
    return 1000 * elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="slack", choices=sorted(WORKLOADS))
    ap.add_argument("--objects", type=int, default=None, help="Slack messages / GitHub issues (workload default)")
    ap.add_argument("--connectors", type=int, default=1000)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-scheduler", action="store_true")
    args = ap.parse_args()
    w = WORKLOADS[args.workload]
    out: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    result: dict[str, Any] = dict(out.get(w.name) or {})
    result["loadavg_1m_at_start"] = loadavg()
    if not args.skip_throughput:
        result["throughput"] = throughput(w, args.objects or w.default_objects)
        print(json.dumps(result["throughput"], indent=1), flush=True)
    if not args.skip_scheduler:
        result["scheduler"] = scheduler_overhead(w, args.connectors)
        print(json.dumps(result["scheduler"], indent=1), flush=True)
    out[w.name] = result
    RESULTS.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
