"""Helpers for connector tests against a real `ctxstore serve` pointed at the fake provider APIs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.support.server import ServerProcess

DB = "acme"
# Where a provider without a fake in this test points: a closed loopback port, so no test reaches a public API.
UNREACHABLE = "http://127.0.0.1:9/"


def connector_env(slack: FakeSlack | None, github: FakeGitHub | None = None, **extra: str) -> dict[str, str]:
    """Server settings: the Slack and GitHub SDKs talk to their fakes (or to a closed loopback port when the
    test has none, never to the public API); the scheduler ticks fast; intervals may be short."""
    return fast_scheduler_env(
        CTXSTORE_CONNECTOR_BASE_URL_SLACK=slack.base_url if slack else UNREACHABLE,
        CTXSTORE_CONNECTOR_TOKEN_URL_SLACK=slack.base_url if slack else UNREACHABLE,
        CTXSTORE_CONNECTOR_BASE_URL_GITHUB=github.base_url if github else UNREACHABLE,
        CTXSTORE_CONNECTOR_TOKEN_URL_GITHUB=github.token_url if github else UNREACHABLE,
        **extra,
    )


def fast_scheduler_env(**extra: str) -> dict[str, str]:
    """Provider-neutral server settings for connector tests: every provider's API and token URL at a closed
    loopback port unless ``extra`` names its fake; fast ticks, short intervals and waits."""
    unreachable = {
        f"CTXSTORE_CONNECTOR_{kind}_URL_{provider}": UNREACHABLE
        for provider in ("SLACK", "GITHUB", "LINEAR", "NOTION", "GMAIL")
        for kind in ("BASE", "TOKEN")
    }
    unreachable["CTXSTORE_CONNECTOR_TOKEN_URL_NOTION"] = UNREACHABLE + "v1/oauth/token"  # the SDK's path rule
    return {
        **unreachable,
        "CTXSTORE_CONNECTOR_TICK_S": "0.2",
        "CTXSTORE_CONNECTOR_MIN_INTERVAL_S": "1",
        "CTXSTORE_CONNECTOR_CONTINUE_AFTER_S": "0.1",
        "CTXSTORE_CONNECTOR_MAX_WAIT_S": "5",
        "CTXSTORE_CONNECTOR_HTTP_TIMEOUT_S": "5",
        **extra,
    }


def wait_for(check: Callable[[], Any], *, timeout: float = 60, every: float = 0.1, what: str = "condition") -> Any:
    deadline = time.time() + timeout
    last: Any = None
    while time.time() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise TimeoutError(f"{what} not reached in {timeout} s (last: {last!r})")


def ready_database(c: httpx.Client, name: str) -> None:
    r = c.post("/databases", json={"database": name})
    assert r.status_code == 202, r.text
    wait_for(
        lambda: c.get("/databases/status", params={"database": name}).json()["data"]["infra"]["ready_for_ingestion"],
        timeout=30,
        what=f"database {name} ready",
    )


def connector(c: httpx.Client, connector_id: str) -> dict[str, Any]:
    r = c.get(f"/connectors/{connector_id}")
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


def wait_cycles(c: httpx.Client, connector_id: str, at_least: int, *, timeout: float = 90) -> dict[str, Any]:
    """Wait until the connector finished `at_least` sync cycles and is idle."""

    def done() -> dict[str, Any] | None:
        data = connector(c, connector_id)
        ok = data["sync_cycles_completed"] >= at_least and data["sync_status"] == "idle"
        return data if ok else None

    result: dict[str, Any] = wait_for(done, timeout=timeout, what=f"{at_least} sync cycle(s) of {connector_id}")
    return result


def statuses(c: httpx.Client, database: str, ids: list[str]) -> dict[str, str]:
    r = c.get("/context/status", params={"database": database, "ids": ",".join(ids)})
    body = r.json()
    entries = body["data"] if isinstance(body.get("data"), list) else (body.get("data") or {}).get("statuses", [])
    return {e["id"]: e.get("indexing_status") or e.get("error_code") for e in entries}


def wait_indexed(c: httpx.Client, database: str, ids: list[str], *, timeout: float = 120) -> None:
    wait_for(
        lambda: (
            all(s == "completed" for s in statuses(c, database, ids).values())
            and len(statuses(c, database, ids)) == len(ids)
        ),
        timeout=timeout,
        every=0.25,
        what=f"{len(ids)} items completed",
    )


@contextmanager
def served_database(
    data_dir: Path, env: dict[str, str], *, database: str = DB, timeout: float = 90
) -> Iterator[tuple[ServerProcess, httpx.Client]]:
    """A `ctxstore serve` on `data_dir` with `env`, and a client with its printed key; `database` ready."""
    with ServerProcess(data_dir, env=env) as srv:
        srv.wait_ready(timeout=timeout)
        [key] = srv.printed_keys
        with srv.client(key) as c:
            ready_database(c, database)
            yield srv, c


class ConnectorCalls:
    """Requests to a server's connector routes; every answer is kept (tests grep them for credentials), as is
    every credential the test handed over (`secrets`)."""

    srv: ServerProcess
    c: httpx.Client
    answers: list[str]
    secrets: list[str]

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        r = self.c.request(method, path, **kw)
        self.answers.append(r.text)
        return r

    def create_connector(self, payload: dict[str, Any]) -> dict[str, Any]:
        r = self.call("POST", "/connectors", json=payload)
        assert r.status_code == 201, r.text
        data: dict[str, Any] = r.json()["data"]
        return data

    def resources(self, connector_id: str) -> dict[str, dict[str, Any]]:
        rows = self.call("GET", f"/connectors/{connector_id}/resources").json()["data"]["resources"]
        return {r["resource_id"]: r for r in rows}

    def assert_no_credential_shown(self) -> None:
        """No secret handed over is in the connector listing, any answer kept, or the server's log."""
        listed = self.call("GET", "/connectors").text
        for secret in self.secrets:
            assert secret not in listed
            assert all(secret not in answer for answer in self.answers), "an answer carried a credential"
            assert not any(secret in line for line in self.srv.lines), "the server log carried a credential"

    def configure(self, connector_id: str, resources: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
        r = self.call("POST", f"/connectors/{connector_id}/configure", json={"resources": resources, **body})
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()["data"]
        return data


@dataclass
class Env(ConnectorCalls):
    srv: ServerProcess
    slack: FakeSlack
    github: FakeGitHub
    c: httpx.Client
    key: str
    secrets: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    def create(self, scope: str, token: str, **body: Any) -> dict[str, Any]:
        self.secrets.append(token)
        payload = {
            "provider": "slack",
            "database": DB,
            "provider_account_scope": scope,
            "credentials": {"access_token": token},
            **body,
        }
        return self.create_connector(payload)


def running_server(data_dir: Path) -> Iterator[Env]:
    """A `ctxstore serve` on the fake Slack and GitHub APIs with database `acme` ready (a session fixture in
    tests/api)."""
    # A loaded shared machine can take more than 30 s to start.
    with (
        FakeSlack() as slack,
        FakeGitHub() as github,
        served_database(data_dir, connector_env(slack, github), timeout=120) as (srv, c),
    ):
        [key] = srv.printed_keys
        yield Env(srv, slack, github, c, key)


def item(channel: str, ts: str, scope: str) -> str:
    """The item id of a Slack message: provider + account scope + native id."""
    return f"slack_{scope}_{channel}_{ts}"
