"""Post/Redirect/Get over plain HTTP: every console form that succeeds answers 303 to a GET address, and that
address shows what the POST did (so a reload posts nothing again, and the address bar never holds a POST-only
address that answers 405). The few answers that are not redirected say why, and their address answers a GET.
Also: /favicon.ico is a real icon, and the webhook test event is listed under Deliveries.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi.routing import APIRoute

from ctxstore.console.pages import auth, byog, connectors, databases, items, keys, playground, webhooks
from tests.console.console_client import ConsoleSession
from tests.console.test_console_flows import Receiver
from tests.console.test_console_security import _create_key
from tests.fakes.slack_api import FakeSlack
from tests.support.server import ServerProcess

SLACK_TOKEN = "xoxb-redirect-test-secret"
# Answers that are not redirected, and why; their address must still answer a GET.
NOT_REDIRECTED = {
    "/keys": "a new key's secret is shown once, in the answer (its one-time token makes a re-post create nothing)",
    "/webhooks/rotate-secret": "the new signing secret is shown once, in the answer",
    "/databases/{db}/playground": "a query: its results are the answer (htmx swaps them in; no state changes)",
    "/byog/{db}/query": "a query: its rows are the answer (htmx swaps them in)",
    "/databases/{db}/upload": "called by the page's script (fetch), never the address bar",
    "/databases/{db}/uploads": "called by the page's script (fetch), never the address bar",
    "/databases/{db}/upload-ref": "called by the page's script (fetch), never the address bar",
}


@pytest.fixture(scope="module")
def admin(server: ServerProcess, admin_key: str) -> Iterator[ConsoleSession]:
    session = ConsoleSession(server.base_url, admin_key)
    yield session
    session.close()


@pytest.fixture(scope="module")
def api(server: ServerProcess, admin_key: str) -> Iterator[httpx.Client]:
    client = server.client(admin_key)
    yield client
    client.close()


def _posts() -> set[str]:
    out = set()
    for module in (auth, keys, databases, items, playground, byog, webhooks, connectors):
        for route in module.router.routes:
            assert isinstance(route, APIRoute)
            if "POST" in route.methods:
                out.add(route.path)
    return out


class Checked:
    def __init__(self, session: ConsoleSession) -> None:
        self.session = session
        self.paths: set[str] = set()

    def post(self, route: str, path: str, data: dict[str, str], shows: str) -> str:
        """POST a form that succeeds: 303 to a GET address that shows `shows`, also when loaded again."""
        r = self.session.post(path, data)
        assert r.status_code == 303, (route, r.status_code, r.text[:400])
        to = r.headers["location"].removeprefix("/console")
        assert to.split("?")[0].split("#")[0] != path.split("?")[0] or "outcome=" in to, to
        for _ in range(2):  # a reload reads the same outcome and posts nothing
            page = self.session.get(to)
            assert page.status_code == 200, (route, to, page.status_code)
            assert shows in page.text, (route, to, shows)
        self.paths.add(route)
        return to


def test_every_successful_console_post_redirects_to_a_get_address(
    server: ServerProcess, admin: ConsoleSession, api: httpx.Client, slack: FakeSlack
) -> None:
    c = Checked(admin)
    receiver = Receiver()
    try:
        # databases
        c.post("/databases", "/databases", {"database": "prg"}, "prg")
        c.post("/databases/{db}/schema", "/databases/prg/schema", {"name": "team", "data_type": "VARCHAR"}, "team")
        to = c.post(
            "/databases/{db}/app-items",
            "/databases/prg/app-items",
            {"title": "Handbook", "text": "Ada works at Acme.", "app_type": "note", "id": "hb-1"},
            "Accepted <code>hb-1</code>",
        )
        assert to.startswith("/databases/prg/items?"), to
        c.post(
            "/databases/{db}/memories", "/databases/prg/memories?type=memory", {"text": "Sam likes tea."}, "Accepted"
        )
        listed = api.post("/context/list", json={"database": "prg", "type": "memory"})
        assert len(listed.json()["data"]["sources"]) == 1, "the reloads posted nothing again"
        item = "/databases/prg/item?id=hb-1&collection=&type=knowledge"
        meta = {"metadata": "{}", "additional_metadata": '{"reviewed": "yes"}'}
        c.post("/databases/{db}/item/metadata", item.replace("/item?", "/item/metadata?"), meta, "Metadata saved")
        c.post("/databases/{db}/item/delete", item.replace("/item?", "/item/delete?"), {}, "Documents")
        r = api.post(
            "/context/ingest",
            data={"database": "prg", "collection": "c1", "app_knowledge": '[{"id": "x", "content": {"text": "x"}}]'},
        )
        assert r.status_code == 202, r.text
        c.post(
            "/databases/{db}/collections/delete",
            "/databases/prg/collections/delete",
            {"collection": "c1", "confirm": "c1"},
            "Collection <strong>c1</strong> and its data are deleted",
        )
        c.post(
            "/databases/{db}/delete",
            "/databases/prg/delete",
            {"confirm": "prg"},
            "Database <strong>prg</strong> is deleted",
        )
        # BYOG
        c.post("/byog", "/byog", {"database": "kgprg"}, "kgprg")
        ran = admin.post("/byog/kgprg/query", {"collection": "main", "query": "MERGE (a:P {name: 'x'}) RETURN a"})
        assert ran.status_code == 200, ran.text
        c.post(
            "/byog/{db}/collections/delete",
            "/byog/kgprg/collections/delete",
            {"collection": "main", "confirm": "main"},
            "Collection <strong>main</strong> is dropped",
        )
        c.post("/byog/{db}/delete", "/byog/kgprg/delete", {"confirm": "kgprg"}, "Graph database <strong>kgprg</strong>")
        # keys
        second = _create_key(server, "default")
        prefix = second.split("_")[1]
        c.post("/keys/{prefix}/revoke", f"/keys/{prefix}/revoke", {}, f"{prefix}</code> is revoked")
        # webhooks: registered without a new secret, a test (refused, so it can be retried), retry, delete
        c.post("/webhooks", "/webhooks", {"url": receiver.url}, "Webhook saved.")
        c.post("/webhooks/test", "/webhooks/test", {}, "Test event: not delivered")
        page = admin.get("/webhooks/deliveries").text
        found = re.search(r"/webhooks/deliveries/(dlv_[0-9a-f]+)/retry", page)
        assert found and "webhook.test" in page, "the test event is listed under Deliveries"
        receiver.accept = True
        c.post("/webhooks/deliveries/{delivery_id}/retry", found.group(0), {}, "queued again")
        c.post("/webhooks/delete", "/webhooks/delete", {}, "Webhook removed")
        # connectors
        slack.add_token(SLACK_TOKEN)
        slack.add_channel("C0PRG", "prg-channel")
        assert api.post("/databases", json={"database": "prgc"}).status_code == 202
        body = {"provider": "slack", "database": "prgc", "cred.access_token": SLACK_TOKEN, "name": "prg slack"}
        to = c.post("/connectors", "/connectors", body, "Connector created")
        cid = to.split("/connectors/")[1].split("?")[0]
        base = f"/connectors/{cid}"
        c.post(
            "/connectors/{connector_id}/configure",
            f"{base}/configure",
            {"sel": "0", "rid.0": "C0PRG"},
            "data-configured",
        )
        deadline = time.time() + 60
        while api.get(f"/connectors/{cid}").json()["data"]["sync_status"] != "idle" and time.time() < deadline:
            time.sleep(0.5)
        c.post("/connectors/{connector_id}/sync", f"{base}/sync", {}, "Sync queued.")
        c.post(
            "/connectors/{connector_id}/interval",
            f"{base}/interval",
            {"sync_interval_seconds": "7200"},
            "Sync interval saved",
        )
        c.post(
            "/connectors/{connector_id}/credentials",
            f"{base}/credentials",
            {"cred.access_token": SLACK_TOKEN},
            "Credentials checked",
        )
        c.post(
            "/connectors/{connector_id}/settings",
            f"{base}/settings",
            {"custom_instructions": "Be brief."},
            "Settings saved",
        )
        c.post(
            "/connectors/{connector_id}/resources/delete",
            f"{base}/resources/delete",
            {"resource_id": "C0PRG"},
            "Resource removed",
        )
        c.post(
            "/connectors/{connector_id}/delete",
            f"{base}/delete",
            {"confirm": "prg slack"},
            "Connector <strong>prg slack</strong> is deleted",
        )
    finally:
        receiver.close()
    signed_in = {"/sign-in", "/sign-out"}  # already redirects (test_console_flows, test_console_security)
    missing = _posts() - c.paths - set(NOT_REDIRECTED) - signed_in
    assert not missing, f"POST forms not checked for a redirect: {sorted(missing)}"


def test_answers_that_are_not_redirected_keep_an_address_that_answers_a_get(admin: ConsoleSession) -> None:
    assert admin.get("/databases").status_code == 200
    for route in ("/keys", "/webhooks/rotate-secret", "/databases/{db}/playground", "/byog/{db}/query"):
        path = route.replace("{db}", "acme")
        r = admin.get(path)
        while r.status_code == 303:
            r = admin.get(r.headers["location"].removeprefix("/console"))
        assert r.status_code != 405, (route, r.status_code)


def test_favicon_is_a_real_icon(server: ServerProcess, admin: ConsoleSession) -> None:
    r = httpx.get(server.base_url + "/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"] == "image/x-icon"
    assert r.content[:4] == b"\x00\x00\x01\x00"  # an ICO header
    page = admin.get("/databases").text
    icons = re.findall(r'<link rel="icon" href="/console(/static/[^"]+)"', page)
    assert icons
    for icon in icons:
        assert admin.get(icon).status_code == 200
