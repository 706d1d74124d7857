"""CTXSTORE_CONNECTOR_PROVIDERS: an operator runs a subset of the five providers; the others stay in the
catalogue as not supported and are refused on create, with the spec's codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxstore.connectors.registry import build_providers
from tests.support.app import make_app


def test_only_the_named_providers_run(tmp_path: Path) -> None:
    la = make_app(tmp_path / "data", connector_providers="slack, github")
    try:
        la.create_ready_database("acme")
        r = la.client.get("/connectors/providers", headers=la.headers())
        assert r.status_code == 200, r.text
        supported = {p["provider"]: p["supported"] for p in r.json()["data"]["providers"]}
        assert supported == {"slack": True, "github": True, "linear": False, "notion": False, "gmail": False}

        body = {"provider": "linear", "database": "acme", "credentials": {"access_token": "lin_api_x"}}
        r = la.client.post("/connectors", json=body, headers=la.headers())
        assert r.status_code == 400
        assert r.json()["error"]["message"] == "provider 'linear' is not available on this server"
        r = la.client.get("/connectors/providers", params={"id": "gmail"}, headers=la.headers())
        assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
        r = la.client.get("/connectors/providers", params={"id": "github"}, headers=la.headers())
        assert r.status_code == 200 and r.json()["data"]["providers"][0]["credential_schema"]
    finally:
        la.close()


def test_every_provider_runs_by_default_and_a_misspelt_name_is_refused() -> None:
    assert sorted(build_providers()) == ["github", "gmail", "linear", "notion", "slack"]
    with pytest.raises(ValueError, match="unknown providers: slak"):
        build_providers({"slak", "github"})
